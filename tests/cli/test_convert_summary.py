"""`lithify convert`'s summary on stderr: plain text in a log or a pipe (no rich imported, the
start-up docs/development.md measures), rich's table on a terminal; the same rows either way."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.conftest import CORPUS

TRACES = CORPUS / "otlp" / "util_genai_openai_v2_chat_tool_call.otlp.json"

# The console entry point, then whether it imported rich (on stdout: stderr is the summary's).
_PROBE = """
import sys
sys.argv = ["lithify", *sys.argv[1:]]
from lithify.cli import main
try:
    main()
except SystemExit:
    pass
print("rich" in sys.modules)
"""


def _convert(*args: str, stderr: int | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, "convert", *args, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr is None else stderr,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_summary_off_a_terminal_is_plain_text_without_rich(tmp_path: Path) -> None:
    out = tmp_path / "facts.jsonl"
    missing = tmp_path / "missing.json"
    done = _convert(str(TRACES), str(missing), "-o", str(out))
    assert done.stdout == b"False\n"
    lines = done.stderr.decode().splitlines()
    assert lines[:5] == [
        "lithify convert",
        "what           count  meaning",
        "inputs read        2",
        "units seen         1  documents, lines, requests, streams",
        f"facts written      1  {out}",
    ]
    assert lines[5:] == [f"unreadable {missing}: no such file"]
    assert out.read_bytes().startswith(b'{"inference_call_id":')


def test_summary_lists_reasons_and_inputs_without_facts(tmp_path: Path) -> None:
    doc = tmp_path / "not-telemetry.json"
    doc.write_text('{"hello": "world"}\n')
    text = _convert(str(TRACES), str(doc), "-o", str(tmp_path / "o.jsonl")).stderr.decode()
    reason = "a document whose shape matches no known source format"
    assert f"no fact: unrecognized_format      1  {reason}\n" in text
    assert f"\nno fact from {doc}: unrecognized_format ×1\n" in text


def test_summary_on_a_terminal_is_riches_table(tmp_path: Path) -> None:
    ours, theirs = pty.openpty()
    try:
        done = _convert(str(TRACES), "-o", str(tmp_path / "o.jsonl"), stderr=theirs)
    finally:
        os.close(theirs)
    shown = b""
    while True:
        try:
            chunk = os.read(ours, 1 << 16)
        except OSError:  # the terminal's other end is closed: all is read
            break
        if not chunk:
            break
        shown += chunk
    os.close(ours)
    assert done.stdout == b"True\n"
    text = shown.decode()
    assert "┃" in text and "facts written" in text and "documents, lines" in text
