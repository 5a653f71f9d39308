"""Getting payloads in: files (and, later, the OTLP receiver and the recording proxy)."""
