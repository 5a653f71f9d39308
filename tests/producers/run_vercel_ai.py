"""Producer: the Vercel AI SDK (``ai``, TypeScript) and its own OpenTelemetry spans.

The SDK runs in Node.js (``vercel-ai/run.mjs``, its packages pinned by
``vercel-ai/package-lock.json`` and installed by ``bash scripts/producers-setup``); this script
drives it like the Python producers: a fresh fake provider per scenario (``fake_openai.py``),
one Node run per scenario (``plain``: generateText, ``stream``: streamText), then the capture
(``traces.pb`` / ``traces.json``, the bodies the SDK's real OTLP/HTTP exporters sent),
``exchanges.json`` and ``manifest.json``. Stdlib only: it runs under any Python 3.11+.

Usage: ``python run_vercel_ai.py OUT``
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fake_openai import FakeOpenAI

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "vercel-ai"


def _spans(path: Path) -> int:
    doc = json.loads(path.read_text("utf-8"))
    return sum(
        len(ss.get("spans", []))
        for rs in doc.get("resourceSpans", [])
        for ss in rs.get("scopeSpans", [])
    )


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    node = shutil.which("node")
    if node is None:
        sys.exit("run_vercel_ai.py: no `node` on PATH")
    if not (PROJECT / "node_modules" / "ai").is_dir():
        sys.exit(
            "run_vercel_ai.py: vercel-ai/node_modules is missing: bash scripts/producers-setup"
        )
    manifest: dict[str, object] = {
        "producer": "vercel-ai",
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("OTEL_")},
        "scenarios": {},
    }
    scenarios: dict[str, object] = {}
    for scenario in ("plain", "stream"):
        folder = out / scenario
        started = time.perf_counter()
        with FakeOpenAI(id_prefix=scenario) as fake:
            proc = subprocess.run(
                [
                    node,
                    str(PROJECT / "run.mjs"),
                    "--base-url",
                    fake.base_url,
                    "--scenario",
                    scenario,
                    "--out",
                    str(folder),
                ],
                cwd=PROJECT,
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            sys.exit(f"run_vercel_ai.py: node run.mjs ({scenario}) exited {proc.returncode}")
        fake.dump(folder / "exchanges.json")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        manifest["node"] = info["node"]
        manifest["versions"] = info["versions"]
        scenarios[scenario] = {
            "spans": _spans(folder / "traces.json"),
            "logs": 0,
            "calls": len(fake.exchanges),
            "steps": info["steps"],
            "requests": info["requests"],
            "seconds": round(time.perf_counter() - started, 3),
        }
    manifest["scenarios"] = scenarios
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )


if __name__ == "__main__":
    main()
