"""Benchmark: `lithify export sft` locally and on Ray Data with 1 and 2 workers, same facts, same
run (docs/scale.md).

    .venv/bin/python bench/scale.py                      # 100,000 calls in 10,000 sessions
    .venv/bin/python bench/scale.py --calls 20000        # a quick run
    .venv/bin/python bench/scale.py --calls 1000000 --profile small --gzip \
        --object-store-gb 10 --spill-disk-use 0.965      # docs/scale.md, 1,000,000 calls

Generates agent sessions of 10 calls (bench/export.py's tool loops: realistic message sizes,
reasoning, tool calls and results, the source payload on ``raw``) as fact files (8, or
``--files``; gzipped with ``--gzip``), sessions interleaved across files as a Collector's
exports are, cached in bench/out/. Then, each in a fresh process: ``export_ray`` on a local Ray
of 1 and of 2 worker CPUs (Ray's own start-up timed apart; ``--object-store-gb`` and
``--spill-disk-use`` set its object store and how full the disk may get with its spilled
objects), and the local export (``--facts DIR``). Reports wall time, rows/s, the driver's peak
RSS and each Ray worker's (the private memory, RssAnon, of the processes that derived sessions),
the load average before and after each, and checks that the three train files are
byte-identical (by SHA-256, each output deleted once hashed; ``--keep`` keeps them).

``--profile`` sets the size of a call: ``full`` (the default, ≈22 KB a call: every text at
bench/export.py's lengths) or ``small`` (≈9.5 KB a call: every text, system prompts, user turns,
reasoning, answers and tool results, at an eighth of those lengths). Both are the same tool loops
in sessions of 10, each call replaying its session's history, with the tools and the raw payload
(input, output and tools again, as JSON strings), and draw the same random numbers; only the
texts' lengths differ. What is left of a small call is mostly that structure, which no shorter
text makes smaller: the tool definitions twice (2.8 KB) and the replayed messages twice.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import random
import shutil
import time
from pathlib import Path

import orjson

import peak
from export import CALLS_PER_SESSION, TOOLS, Texts, _raw, _session
from lithify.core.factfile import write_line
from lithify.model import InferenceCall, Message, Source, TextPart

OUT = Path(__file__).resolve().parent / "out"
FILES = 8
# A profile: the factor on every text's length (bench/export.py's lengths at 1.0).
PROFILES = {"full": 1.0, "small": 0.125}

RAY = """
import sys, time, orjson
from pathlib import Path
t0 = time.perf_counter()
from lithify.cli.engine import ray_session
from lithify.export import ExportOptions
from lithify.export.distributed import export_ray
facts, out, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store, disk = int(sys.argv[4]), float(sys.argv[5])
paths = sorted(facts.iterdir())
if store or disk:  # the local Ray ray_session would start, with these limits
    import ray
    ray.init(num_cpus=workers, log_to_driver=False, include_dashboard=False,
             object_store_memory=store or None,
             _system_config={"local_fs_capacity_threshold": disk} if disk else None)
with ray_session(workers=workers):
    t1 = time.perf_counter()
    done = export_ray(paths, out, ExportOptions(kind="sft"))
    t2 = time.perf_counter()
print(orjson.dumps({"start": t1 - t0, "export": t2 - t1, "rows": done.summary.rows,
                    "peaks": sorted(done.peaks.values())}).decode())
"""


class Scaled:
    """``Texts`` with every length range multiplied by ``factor`` (at least 1 character)."""

    def __init__(self, texts: Texts, factor: float) -> None:
        self.texts, self.factor = texts, factor

    def __call__(self, lo: int, hi: int) -> str:
        if self.factor == 1.0:
            return self.texts(lo, hi)
        return self.texts(max(1, round(lo * self.factor)), max(1, round(hi * self.factor)))


def facts_folder(calls: int, profile: str, gz: bool, files: int = FILES) -> Path:
    """Where the generated facts are cached (the full profile in 8 files under its first
    name)."""
    tag = ("" if profile == "full" else f"-{profile}") + ("-gz" if gz else "")
    tag += "" if files == FILES else f"-{files}-files"
    return OUT / f"scale-{calls}-calls{tag}-v1"


def generate(
    folder: Path,
    calls: int,
    seed: int = 7,
    factor: float = 1.0,
    gz: bool = False,
    files: int = FILES,
) -> None:
    """``calls`` facts in ``calls / 10`` sessions over ``files`` fact files, sessions
    interleaved; ``factor``: on every text's length; ``gz``: the files gzipped (the same
    lines)."""
    rng = random.Random(seed)
    texts = Scaled(Texts(rng), factor)
    systems = [Message("system", [TextPart(texts(600, 2000))]) for _ in range(4)]
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    bufs = [bytearray() for _ in range(files)]
    if gz:
        outs = [
            gzip.open(tmp / f"part-{i:03d}.jsonl.gz", "wb", compresslevel=1)  # noqa: SIM115
            for i in range(files)
        ]
    else:
        outs = [open(tmp / f"part-{i:03d}.jsonl", "wb") for i in range(files)]  # noqa: SIM115
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
            i = rng.randrange(files)  # a session's calls land in any file
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
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--files", type=int, default=FILES, help="fact files (8)")
    parser.add_argument(
        "--gzip",
        action="store_true",
        help="fact files gzipped (the same lines, a twelfth of the disk)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the three exports' outputs")
    parser.add_argument(
        "--object-store-gb", type=float, default=0, help="Ray's object store (default: Ray's)"
    )
    parser.add_argument(
        "--spill-disk-use",
        type=float,
        default=0,
        help="the disk use (0-1) up to which Ray may spill objects (default: Ray's, 0.95)",
    )
    args = parser.parse_args()
    facts = facts_folder(args.calls, args.profile, args.gzip, args.files)
    if not facts.exists():
        t0 = time.perf_counter()
        factor = PROFILES[args.profile]
        generate(facts, args.calls, factor=factor, gz=args.gzip, files=args.files)
        print(f"generated {args.calls:,} calls in {time.perf_counter() - t0:.0f} s: {facts}")
    size = sum(p.stat().st_size for p in facts.iterdir())
    plain = sum(_length(p) for p in facts.iterdir())
    print(
        f"{args.calls:,} calls, {args.calls // CALLS_PER_SESSION:,} sessions, "
        f"{size / 1e9:.2f} GB of facts on disk{' (gzipped)' if args.gzip else ''}, "
        f"{plain / 1e9:.2f} GB of lines ({plain / args.calls / 1e3:.1f} KB a call, "
        f"profile {args.profile})",
        flush=True,
    )
    work = OUT / "scale-out"
    shutil.rmtree(work, ignore_errors=True)
    runs: list[tuple[str, Path, list[str]]] = []
    for workers in (1, 2):
        target = work / f"ray-{workers}"
        runs.append(
            (
                f"ray, {workers} worker(s)",
                target,
                peak.python(
                    RAY,
                    *(str(facts), str(target), str(workers)),
                    *(str(int(args.object_store_gb * 1e9)), str(args.spill_disk_use)),
                ),
            )
        )
    # The local export last: at 1,000,000 calls a failing Ray run (its object store full) is
    # then known before the local export's quarter of an hour.
    runs.append(
        ("local", work / "local", peak.lithify(
            "export", "sft", "--facts", str(facts), "-o", str(work / "local"), "--json",
            "--no-progress",
        ))
    )  # fmt: skip
    results = []
    for name, target, argv in runs:
        before = os.getloadavg()[0]
        secs, _, rss, out = _run(argv)
        after = os.getloadavg()[0]
        got = orjson.loads(out)
        if name == "local":
            export, start, peaks = secs, 0.0, []
        else:
            export, start, peaks = got["export"], got["start"], got["peaks"]
        rows = sum(got["rows"].values())
        train = target / "train.jsonl"
        digest, length = _sha256(train)
        results.append((name, export, start, rss, rows, peaks, before, after, digest, length))
        workers_mb = ", ".join(f"{p / 1e6:.0f}" for p in peaks) or "-"
        print(
            f"{name}: {secs:.0f} s in all, {export:.1f} s export, {start:.1f} s Ray start, "
            f"{rows:,} rows ({rows / export:.0f}/s), driver {rss:.0f} MB, workers {workers_mb} MB, "
            f"train.jsonl {length / 1e9:.2f} GB sha256 {digest}, load {before:.1f} → {after:.1f}",
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(target)
    results.insert(0, results.pop())  # the local export first in the table
    local_digest = results[0][8]
    for name, *_, digest, _ in results[1:]:
        print(f"{name}: train.jsonl {'identical' if digest == local_digest else 'DIFFERS'}")
    print(
        f"{args.calls:,} calls of {plain / args.calls / 1e3:.1f} KB (profile {args.profile}), "
        f"train.jsonl sha256 {local_digest}"
    )
    print(
        f"{'run':<20} {'export s':>9} {'ray start s':>11} {'rows/s':>8} {'driver MB':>9} "
        f"{'load':>11}  workers' peak MB"
    )
    for name, secs, start, rss, rows, peaks, before, after, _, _ in results:
        workers_mb = ", ".join(f"{p / 1e6:.0f}" for p in peaks) or "-"
        load = f"{before:.1f}→{after:.1f}"
        print(
            f"{name:<20} {secs:>9.1f} {start:>11.1f} {rows / secs:>8.0f} {rss:>9.0f} "
            f"{load:>11}  {workers_mb}"
        )


def _length(path: Path) -> int:
    """The bytes of a fact file's lines (gunzipped)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            n += len(block)
    return n


def _sha256(path: Path) -> tuple[str, int]:
    """The SHA-256 of a file, read in 1 MiB blocks, and its size."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest(), path.stat().st_size


def _run(argv: list[str]) -> tuple[float, float, float, bytes]:
    from export import _run as run

    return run(argv)


if __name__ == "__main__":
    main()
