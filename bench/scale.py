"""Benchmark: `lithify export sft` locally and on Ray Data with 1 and 2 workers, same facts, same
run (docs/scale.md).

    .venv/bin/python bench/scale.py                      # 100,000 calls in 10,000 sessions
    .venv/bin/python bench/scale.py --calls 20000        # a quick run

Generates agent sessions of 10 calls (bench/export.py's tool loops: realistic message sizes,
reasoning, tool calls and results, the source payload on ``raw``) as fact files, 8 of them,
sessions interleaved across files as a Collector's exports are, cached in bench/out/. Then, each
in a fresh process: the local export (``--facts DIR``), and ``export_ray`` on a local Ray of 1
and of 2 worker CPUs (Ray's own start-up timed apart). Reports wall time, rows/s, the driver's
peak RSS and each Ray worker's (VmHWM of the processes that derived sessions), and checks that
the three train files are byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from pathlib import Path

import orjson

import peak
from export import CALLS_PER_SESSION, TOOLS, Texts, _raw, _session
from lithify.core.factfile import write_line
from lithify.model import InferenceCall, Message, Source, TextPart

OUT = Path(__file__).resolve().parent / "out"
FILES = 8

RAY = """
import sys, time, orjson
from pathlib import Path
t0 = time.perf_counter()
from lithify.cli.engine import ray_session
from lithify.export import ExportOptions
from lithify.export.distributed import export_ray
facts, out, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
paths = sorted(facts.iterdir())
with ray_session(workers=workers):
    t1 = time.perf_counter()
    done = export_ray(paths, out, ExportOptions(kind="sft"))
    t2 = time.perf_counter()
print(orjson.dumps({"start": t1 - t0, "export": t2 - t1, "rows": done.summary.rows,
                    "peaks": sorted(done.peaks.values())}).decode())
"""


def generate(folder: Path, calls: int, seed: int = 7) -> None:
    """``calls`` facts in ``calls / 10`` sessions over FILES fact files, sessions interleaved."""
    rng = random.Random(seed)
    texts = Texts(rng)
    systems = [Message("system", [TextPart(texts(600, 2000))]) for _ in range(4)]
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    bufs = [bytearray() for _ in range(FILES)]
    outs = [open(tmp / f"part-{i:03d}.jsonl", "wb") for i in range(FILES)]  # noqa: SIM115
    for s in range(calls // CALLS_PER_SESSION):
        for k, (inputs, output) in enumerate(_session(texts, rng, s, systems)):
            ident = hashlib.blake2b(f"{s}/{k}".encode(), digest_size=16).hexdigest()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_760_000_000 + s * 3 + k))
            fact = InferenceCall(
                inference_call_id=ident,
                session_id=f"sess-{s:07d}",
                source=Source("otel.genai"),
                provider="openai",
                model="gpt-4o-mini",
                input_messages=inputs,
                output_messages=[output],
                tools=TOOLS,
                started_at=f"{stamp}.{k:03d}000Z",
                raw=_raw(inputs, output, "gpt-4o-mini"),
            )
            i = rng.randrange(FILES)  # a session's calls land in any file
            write_line(fact, bufs[i])
            if len(bufs[i]) > 1 << 20:
                outs[i].write(bufs[i])
                bufs[i].clear()
    for buf, fh in zip(bufs, outs, strict=True):
        fh.write(buf)
        fh.close()
    tmp.rename(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    facts = OUT / f"scale-{args.calls}-calls-v1"
    if not facts.exists():
        t0 = time.perf_counter()
        generate(facts, args.calls)
        print(f"generated {args.calls:,} calls in {time.perf_counter() - t0:.0f} s: {facts}")
    size = sum(p.stat().st_size for p in facts.iterdir())
    print(
        f"{args.calls:,} calls, {args.calls // CALLS_PER_SESSION:,} sessions, {size / 1e9:.2f} GB"
    )
    work = OUT / "scale-out"
    results = []
    secs, _, rss, out = _run(
        peak.lithify(
            "export", "sft", "--facts", str(facts), "-o", str(work / "local"), "--json",
            "--no-progress",
        )
    )  # fmt: skip
    rows = sum(orjson.loads(out)["rows"].values())
    results.append(("local", secs, 0.0, rss, rows, []))
    for workers in (1, 2):
        target = work / f"ray-{workers}"
        secs, _, rss, out = _run(peak.python(RAY, str(facts), str(target), str(workers)))
        got = orjson.loads(out)
        rows = sum(got["rows"].values())
        results.append(
            (f"ray, {workers} worker(s)", got["export"], got["start"], rss, rows, got["peaks"])
        )
    local = (work / "local" / "train.jsonl").read_bytes()
    for workers in (1, 2):
        same = (work / f"ray-{workers}" / "train.jsonl").read_bytes() == local
        print(f"ray {workers} worker(s): train.jsonl {'identical' if same else 'DIFFERS'}")
    print(
        f"{'run':<20} {'export s':>9} {'ray start s':>11} {'rows/s':>8} {'driver MB':>9}  workers' peak MB"
    )
    for name, secs, start, rss, rows, peaks in results:
        workers_mb = ", ".join(f"{p / 1e6:.0f}" for p in peaks) or "-"
        print(
            f"{name:<20} {secs:>9.1f} {start:>11.1f} {rows / secs:>8.0f} {rss:>9.0f}  {workers_mb}"
        )


def _run(argv: list[str]) -> tuple[float, float, float, bytes]:
    from export import _run as run

    return run(argv)


if __name__ == "__main__":
    main()
