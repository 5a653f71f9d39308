"""Benchmark: `lithify export sft` from a SQLite store to JSONL and Parquet.

    .venv/bin/python bench/export.py                   # 1,000,000 calls, and 100,000 for RSS
    .venv/bin/python bench/export.py --calls 100000 --small 0   # a quick run (≈3 minutes)

The stores are generated on first use and cached in bench/out/ (gitignored): ≈7 GB and ≈12
minutes for 1,000,000 calls, ≈0.7 GB and ≈2 minutes for 100,000, measured on a 2-core machine.

Generates agent sessions of 10 calls — a tool loop: each call's input is the previous input, the
previous output and a tool result, so segments are long — with realistic message sizes (a few
hundred bytes to a few KB; reasoning, tool calls, string and object tool results, tools, the
source payload on ``raw``) straight into a SQLite store through ``insert_facts``. The store is
cached in bench/out/ under a name that holds the parameters (generation is timed apart and never
counted). Then, in fresh processes so that peak RSS is each run's own: the bare store read of the
same facts (``iter_facts(order="session")``, decoded, nothing derived: the baseline), and
`lithify export sft` to JSONL and to Parquet, validation on as always, in one process
(``LITHIFY_EXPORT_WORKERS=0``) and with two worker processes building the rows (``=2``). CPU
time is the export's with its workers' (the system time and voluntary context switches apart:
threads waiting on one another show there); peak RSS the main process's plus each worker's. Runs
use compiled bytecode, as an installed lithify does (a warm-up writes it). Every figure is the
median of the rounds of this run; ratios are against the baseline of this run. A second,
smaller store (``--small``) shows peak RSS does not grow with the number of calls.

``--tokenizer PATH_OR_NAME`` adds `lithify export sft --tokenizer …` to JSONL (every row counted,
docs/export.md, Token budgets) beside the plain export, and prints the ratio of their rows/s;
``--tokenizer built`` trains a small BPE tokenizer here on the bench's words, with the Qwen3
chat template of tests/export/chat_templates, and saves it in bench/out/ (nothing downloaded).

``--page-size BYTES`` makes (and caches) the stores with another SQLite page size than a new
store's (lithify.store.sqlite.PAGE_SIZE), to weigh what pages cost reads.

``--stages CALLS`` shows where the time goes instead: the pipeline run up to each stage (the
store read, the fact digests, the flags' look at the facts, sessions and segments, rows, flags on
the rows, then the whole export to JSONL and to Parquet), one process each, their CPU time (all
threads') as medians of the rounds, and what each stage adds.

``--parts CALLS`` times the session read of a store whole and in the parts of 256 calls that an
export's workers read (``FactStore.session_parts``), one after the other in one process: the
same calls, so the two should cost alike (with ``--before``, also from another checkout).

``--instructions CALLS`` counts the instructions (valgrind's cachegrind) of a one-process export
up to its rows flagged and whole to JSONL, and of the read, with ``--before`` too: a run gives
the same count within about 0.1% where CPU times here differ by 15-40% from run to run, so a
change of a few percent shows. Valgrind has no SHA-NI: the hashing of the JSONL counts several
times its share; compare the stages before the writes.

``--before OLD/src`` runs each export again with lithify imported from another checkout's
``src`` (PYTHONPATH), in the same rounds, so that a change is measured against its starting
point under the same load; ``--src NEW/src`` takes the other runs' lithify from a checkout too
(a clean worktree, when others' uncommitted work sits in this one). The load average at the
start and the end of each size is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import orjson

import peak
from lithify.model import (
    InferenceCall,
    Message,
    ReasoningPart,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from lithify.store import open_store
from lithify.store.migrations import LATEST
from lithify.store.sqlite import PAGE_SIZE

OUT = Path(__file__).resolve().parent / "out"
CALLS_PER_SESSION = 10
CONCURRENT = 200  # sessions whose calls interleave in time, as a busy service's do
BATCH = 1000  # facts per insert_facts call

WORDS = (
    "the agent calls a tool to look up the order then reads the result and answers the user with "
    "a short summary of the shipping status including carrier tracking number and expected date "
    "refund policy warehouse inventory customer account address invoice payment pending delayed "
    "delivered returned exchange label package weight dimensions priority standard express"
).split()


class Texts:
    """Random word text cut from one large pool: varied like real text, cheap to make."""

    def __init__(self, rng: random.Random, size: int = 8 << 20) -> None:
        words = rng.choices(WORDS, k=size // 6)
        self.pool = " ".join(words)
        self.rng = rng

    def __call__(self, lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        start = self.rng.randrange(0, len(self.pool) - n)
        return self.pool[start : start + n]


TOOLS = [
    ToolDefinition(
        name,
        f"{name.replace('_', ' ').capitalize()} for the current customer.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order id, e.g. A-1234."},
                "fields": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["order_id"],
        },
    )
    for name in ("lookup_order", "search_inventory", "get_invoice", "track_package")
]


def _session(texts: Texts, rng: random.Random, s: int, systems: list[Message]) -> list[list]:
    """The (input, output) message lists of one session's calls."""
    history = [systems[s % len(systems)], Message("user", [TextPart(texts(150, 900))])]
    calls = []
    for k in range(CALLS_PER_SESSION):
        last = k == CALLS_PER_SESSION - 1
        parts: list = [ReasoningPart(texts(100, 600))]
        if last:
            parts.append(TextPart(texts(300, 2000)))
            out = Message("assistant", parts, "stop")
        else:
            if rng.random() < 0.3:
                parts.append(TextPart(texts(40, 200)))
            call_id = f"call_{s:07d}_{k}"
            args = {"order_id": f"A-{rng.randrange(10**6)}", "fields": ["status", "eta"]}
            parts.append(ToolCallPart(call_id, TOOLS[k % len(TOOLS)].name, args))
            out = Message("assistant", parts, "tool_calls")
        calls.append((list(history), out))
        if not last:
            # The next input replays the output (without its finish reason) and the result.
            result: object = texts(150, 1500)
            if rng.random() < 0.25:
                result = {"status": "ok", "items": [texts(20, 80) for _ in range(4)], "n": k}
            history += [
                Message("assistant", out.parts),
                Message("tool", [ToolCallResponsePart(call_id, result)]),
            ]
    return calls


def _raw(inputs: list[Message], output: Message, model: str) -> dict[str, object]:
    """The source payload as an OTLP span's attributes hold it: content as JSON strings."""
    from msgspec.json import encode

    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.input.messages": encode(inputs).decode(),
        "gen_ai.output.messages": encode([output]).decode(),
        "gen_ai.tool.definitions": encode(TOOLS).decode(),
    }


def fact(
    session_id: str, n: int, key: str, k: int, t: int, inputs: list[Message], output: Message
) -> InferenceCall:
    """Call ``k`` of session number ``n``, at second ``t``, its id from ``key``."""
    model = "gpt-4o-mini" if n % 3 else "claude-sonnet-4"
    ident = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return InferenceCall(
        inference_call_id=ident,
        session_id=session_id,
        trace_id=ident,
        span_id=ident[:16],
        source=Source("otel.genai"),
        provider="openai",
        model=model,
        input_messages=inputs,
        output_messages=[output],
        tools=TOOLS,
        request={"temperature": 0.7, "max_tokens": 2048},
        input_tokens=sum(len(m.parts) for m in inputs) * 150,
        output_tokens=200,
        duration_ms=900.0,
        started_at=f"{stamp}.{k % 1000:03d}000Z",
        observed_at=f"{stamp}.{k % 1000:03d}900Z",
        raw=_raw(inputs, output, model),
    )


def with_page_size(path: Path | str, page_size: int) -> None:
    """Make the SQLite file a store will open at ``path`` with ``page_size`` pages: a store
    takes its page size from its first write (store/sqlite.py), so only an empty file can."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA page_size={page_size}")
        conn.execute("PRAGMA journal_mode=WAL")


def write_store(
    path: Path, facts: Iterable[InferenceCall], page_size: int = PAGE_SIZE
) -> tuple[int, float]:
    """``facts`` written into a new SQLite store at ``path`` (renamed there once complete) of
    ``page_size`` pages; (facts, seconds, making them included)."""
    t0 = time.perf_counter()
    written = 0
    tmp = path.with_suffix(".tmp")
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        p.unlink(missing_ok=True)
    if page_size != PAGE_SIZE:
        with_page_size(tmp, page_size)
    with open_store(f"sqlite:///{tmp}") as store:
        it = iter(facts)
        while batch := list(islice(it, BATCH)):
            written += store.insert_facts(batch).inserted
    # Closing the store checkpointed its WAL into the file: the file alone is the store.
    wal = Path(f"{tmp}-wal")
    if wal.exists() and wal.stat().st_size:
        raise SystemExit(f"{wal} still holds data: not renaming a partial store")
    tmp.replace(path)
    return written, time.perf_counter() - t0


def generate(
    path: Path, calls: int, seed: int = 7, page_size: int = PAGE_SIZE
) -> tuple[int, float]:
    """Write ``calls`` facts (``calls / 10`` sessions) into a new store; (facts, seconds)."""
    rng = random.Random(seed)
    texts = Texts(rng)
    systems = [Message("system", [TextPart(texts(600, 2000))]) for _ in range(4)]
    sessions = calls // CALLS_PER_SESSION
    base = 1_760_000_000

    def facts() -> Iterator[InferenceCall]:
        for first in range(0, sessions, CONCURRENT):
            group = range(first, min(first + CONCURRENT, sessions))
            convs = {s: _session(texts, rng, s, systems) for s in group}
            for k in range(CALLS_PER_SESSION):
                for s in group:
                    t = base + s * 3 + k * 7
                    yield fact(f"sess-{s:07d}", s, f"{s}/{k}", k, t, *convs[s][k])
            del convs

    return write_store(path, facts(), page_size)


def store_for(calls: int, page_size: int = PAGE_SIZE) -> tuple[Path, str]:
    """The cached store of ``calls`` facts (made when missing), and a note on it."""
    OUT.mkdir(parents=True, exist_ok=True)
    # The page size a new store takes and the schema version are in the name: a store cached
    # before either changed differs (one of version 11 keeps no digests of its facts).
    name = (
        f"export-{calls}-calls-{CALLS_PER_SESSION}-per-session-{page_size // 1024}k-pages"
        f"-v{LATEST}.db"
    )
    path = OUT / name
    if path.exists():
        return path, f"cached {path.name} ({path.stat().st_size / 1e9:.1f} GB)"
    n, secs = generate(path, calls, page_size=page_size)
    size = path.stat().st_size / 1e9
    return path, f"generated {n:,} facts in {secs:.0f} s ({size:.1f} GB): {path.name}"


READ = """
import sys
from lithify.store import FactFilter, open_store
n = 0
with open_store(sys.argv[1]) as store:
    for _ in store.iter_facts(FactFilter(order="session")):
        n += 1
print(n)
"""


# Where an export's time goes: the pipeline run up to one stage, in one process, its CPU time
# (every thread's) printed. Each stage adds one step to the one before.
STAGES = (
    "store read",
    "+ fact digests (manifest)",
    "+ flags' look at the facts",
    "+ sessions and segments",
    "+ rows, validated",
    "+ flags on the rows",
    "whole export → jsonl",
    "whole export → parquet",
)
STAGE = """
import shutil, sys, tempfile, time
from lithify.derive.feedback import FeedbackIndex
from lithify.derive.segments import iter_segments
from lithify.derive.sessions import DeriveStats
from lithify.export.flags import Flagger, dropped_flags
from lithify.export.manifest import FactDigests
from lithify.export.pipeline import ExportOptions, export, make_builder
from lithify.export.source import from_store
from lithify.store import FactFilter, open_store

url, stage = sys.argv[1], int(sys.argv[2])
with open_store(url) as store:
    selection = from_store(store, FactFilter())
    t0 = time.process_time()
    if stage >= 6:
        out = tempfile.mkdtemp()
        # One process: the stages above are, and this process's CPU time is what is counted.
        options = ExportOptions("sft", fmt="jsonl" if stage == 6 else "parquet")
        export(selection, out, options, workers=0)
        shutil.rmtree(out)
    else:
        options = ExportOptions("sft")
        builder = make_builder(options)
        flagger = Flagger("sft", dropped_flags((), ()), builder.validator)
        # (fact, kept digest) pairs; before session 21 a second stream, ``digested()``
        pairs = selection.digested() if hasattr(selection, "digested") else selection.facts
        facts = (f for f, _ in pairs)
        if stage >= 1:
            facts = FactDigests().watch(pairs)
        if stage >= 2:
            facts = flagger.watch(facts)
        items = facts
        if stage >= 3:
            index = FeedbackIndex(selection.feedback, selection.aliases)
            items = iter_segments(facts, index, DeriveStats())
        if stage >= 4:
            items = (row for segment in items for row in builder.rows(segment))
        if stage >= 5:
            items = flagger.apply(items)
        for _ in items:
            pass
    print(time.process_time() - t0)
"""


# The session read of a store whole, and in the parts an export's workers read (one after the
# other, in one process): the CPU time of each, printed as "whole parts count".
PARTS = """
import sys, time
from lithify.store import FactFilter, open_store

with open_store(sys.argv[1]) as store:
    f = FactFilter(order="session")
    t0 = time.process_time()
    for _ in store.iter_facts(f):
        pass
    t1 = time.process_time()
    parts = store.session_parts(f, 256)
    for part in parts:
        for _ in store.iter_facts(FactFilter(order="session", part=part)):
            pass
    print(t1 - t0, time.process_time() - t1, len(parts))
"""


def parts(db: Path, rounds: int, before: str | None, src: str | None) -> None:
    """CPU seconds of the session read whole and in parts of 256 calls (median of
    ``rounds``), with this lithify and with ``before``'s."""
    sides = [("after", src), *([("before", before)] if before else [])]
    warm(*(s for _, s in sides))
    got: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sides}
    count = 0
    for r in range(rounds):
        for name, path in sides if r % 2 == 0 else sides[::-1]:
            out = _run(peak.python(PARTS, f"sqlite:///{db}"), path)[3].split()
            got[name].append((float(out[0]), float(out[1])))
            count = int(out[2])
    print(f"{'side':<8}{'whole CPU s':>13}{'in parts CPU s':>16}{'× whole':>9}  ({count:,} parts)")
    for name, runs in got.items():
        whole = statistics.median(w for w, _ in runs)
        split = statistics.median(p for _, p in runs)
        print(f"{name:<8}{whole:>13.2f}{split:>16.2f}{split / whole:>9.2f}")


def stages(db: Path, rounds: int, src: str | None = None) -> None:
    """CPU seconds of the pipeline up to each stage (median of ``rounds``, interleaved), and
    what each stage adds; ``src``: lithify from this ``src`` folder."""
    warm(src)
    cpu: list[list[float]] = [[] for _ in STAGES]
    for _ in range(rounds):
        for i in range(len(STAGES)):
            cpu[i].append(float(_run(peak.python(STAGE, f"sqlite:///{db}", str(i)), src)[3]))
    medians = [statistics.median(c) for c in cpu]
    print(f"{'stage':<32}{'CPU s':>8}{'adds':>8}{'× read':>8}")
    for i, (name, m) in enumerate(zip(STAGES, medians, strict=True)):
        # The whole exports add the writers, the manifest and the card to the flagged rows.
        adds = m - medians[min(i - 1, 5)] if i else m
        print(f"{name:<32}{m:>8.2f}{adds:>8.2f}{m / medians[0]:>8.2f}")


# Instructions counted by valgrind's cachegrind: the same run gives the same count within about
# 0.1%, where this machine's CPU times of one run differ by 15-40% (docs/export-speed.md). Up to
# these stages: the read, the rows flagged (all but the writes), the whole export to JSONL.
_COUNTED = (0, 5, 6)


def instructions(db: Path, before: str | None, src: str | None) -> None:
    """Instructions of a one-process export up to ``_COUNTED`` stages, under valgrind, with
    this lithify and with ``before``'s: a change's cost measured without the machine's noise."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    sides = [("after", src), *([("before", before)] if before else [])]
    warm(*(s for _, s in sides))
    got: dict[str, list[int]] = {name: [] for name, _ in sides}
    for stage in _COUNTED:
        for name, path in sides:
            argv = [
                "valgrind", "--tool=cachegrind", "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                *peak.python(STAGE, f"sqlite:///{db}", str(stage)),
            ]  # fmt: skip
            # Sets and dicts of strings iterate in the hash seed's order: one seed, one count.
            env = _env(path, {"PYTHONHASHSEED": "0"})
            done = subprocess.run(argv, env=env, capture_output=True, check=True)
            refs = re.search(rb"I\s+refs:\s+([\d,]+)", done.stderr)
            assert refs is not None, done.stderr[-2000:]
            got[name].append(int(refs.group(1).replace(b",", b"")))
    print(f"{'up to':<34}" + "".join(f"{name + ' Ir':>18}" for name in got), end="")
    print(f"{'after/before':>14}" if before else "")
    for i, stage in enumerate(_COUNTED):
        print(f"{STAGES[stage]:<34}" + "".join(f"{c[i]:>18,}" for c in got.values()), end="")
        print(f"{got['after'][i] / got['before'][i]:>14.3f}" if before else "")
    print(
        "(valgrind runs without SHA-NI: hashing the JSONL counts several times what it costs; "
        "compare the stages before it)"
    )


# Worker processes of an export (LITHIFY_EXPORT_WORKERS) report their own peak too, as
# "workers VmHWM": a sitecustomize on the path of every process of a run, reporting in those
# whose parent is not the benchmark (the export's children).
SITE = OUT / "bench-site"
_SITECUSTOMIZE = """
import atexit, os, sys

def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("workers " + line)

if os.environ.get("LITHIFY_BENCH_PID") not in (None, str(os.getppid())):
    atexit.register(_peak)
"""


def _workers_mb(stderr: bytes) -> float:
    """The peaks the export's worker processes reported, added up (MB)."""
    text = stderr.decode(errors="replace")
    return sum(int(part.split()[0]) for part in text.split("workers VmHWM:")[1:]) / 1024


def _env(src: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measured run: lithify from ``src`` (else the installed one), the
    workers' peak reporting, ``extra``."""
    SITE.mkdir(parents=True, exist_ok=True)
    (SITE / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    env = {**os.environ, **(extra or {}), "LITHIFY_BENCH_PID": str(os.getpid())}
    # An installed lithify runs from compiled bytecode: let the warm-up (``warm``) write it,
    # or every run would compile every module it imports (≈0.3 s of CPU here).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    paths = [str(SITE)] + ([str(Path(src).resolve())] if src is not None else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _run(
    argv: list[str], src: str | None = None, extra: dict[str, str] | None = None
) -> tuple[float, float, float, bytes, os.struct_rusage]:
    """Run a command (one that reports its peak, bench/peak.py); (wall seconds, CPU seconds of
    it and its children, its peak RSS with its workers' in MB, stdout, their rusage). ``src``:
    import lithify from this ``src`` folder; ``extra``: environment variables."""
    env = _env(src, extra)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
        assert proc.stdout is not None
        out = proc.stdout.read()
        # This child's CPU time, with that of the children it waited for (its workers).
        _, status, usage = os.wait4(proc.pid, 0)
        secs = time.perf_counter() - t0
        err.seek(0)
        stderr = err.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited with {proc.returncode}: {stderr[-2000:]!r}")
    rss = peak.parse_mb(stderr.replace(b"workers VmHWM:", b"")) + _workers_mb(stderr)
    return secs, usage.ru_utime + usage.ru_stime, rss, out, usage


WARM = """
import lithify.cli.export, lithify.export.pipeline, lithify.export.writers, lithify.store
import pyarrow.parquet
"""


def warm(*srcs: str | None) -> None:
    """Import what the runs import, once per checkout, writing its bytecode."""
    for src in dict.fromkeys(srcs):
        _run(peak.python(WARM), src)


def built_tokenizer(vocab: int = 2000) -> Path:
    """A BPE tokenizer trained on the bench's words with TRL's Qwen3 chat template (the copy in
    tests/export/chat_templates), saved in bench/out/: a model folder `--tokenizer` loads."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # "PyTorch was not found"
    from tokenizers import Tokenizer, decoders, models, trainers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    folder = OUT / f"tokenizer-qwen3-bpe-{vocab}"
    if (folder / "tokenizer.json").exists():
        return folder
    root = Path(__file__).resolve().parent.parent
    template = (root / "tests/export/chat_templates/qwen3.jinja").read_text(encoding="utf-8")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=specials,
        initial_alphabet=ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([template, " ".join(WORDS)] * 50, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = template
    fast.save_pretrained(folder)
    return folder


def _steps(
    db: Path,
    out_dir: Path,
    tokenizer: str | None,
    before: str | None = None,
    src: str | None = None,
) -> Iterator[tuple[str, list[str], str | None, dict[str, str]]]:
    url = f"sqlite:///{db}"
    yield "store read (baseline)", peak.python(READ, url), src, {}
    for fmt in ("jsonl", "parquet"):
        for workers in ("0", "2"):
            env = {"LITHIFY_EXPORT_WORKERS": workers}
            name = f"→ {fmt}" + (", 2 workers" if workers != "0" else "")
            sides = [("export sft ", src, "after")]
            sides += [("  before: ", before, "before")] if before else []
            for label, where, side in sides:
                argv = ["export", "sft", "-s", url, "-o", str(out_dir / f"{fmt}-{workers}-{side}")]
                cmd = peak.lithify(*argv, "--format", fmt, "--no-progress", "--json")
                yield label + name, cmd, where, env
    if tokenizer is not None:
        argv = ["export", "sft", "-s", url, "-o", str(out_dir / "tokens"), "--profile", "trl"]
        argv += ["--tokenizer", tokenizer, "--no-progress", "--json"]
        yield "export sft → jsonl, tokens", peak.lithify(*argv), src, {}


class Step(NamedTuple):
    name: str
    secs: float  # median wall time
    cpu: float  # median CPU time (user + system)
    sys: float  # median system CPU time
    # Median voluntary context switches (threads waiting for the GIL, or on each other, show
    # here: docs/export-speed.md, Rows as lines, bodies unpacked in Python).
    switches: int
    rss: float  # highest peak RSS of the rounds, MB
    facts: int
    rows: int
    size: int  # bytes written


def bench(
    db: Path,
    rounds: int,
    tokenizer: str | None = None,
    before: str | None = None,
    src: str | None = None,
) -> list[Step]:
    """Each step ``rounds`` times, rounds interleaved so that load drifts hit all alike."""
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    system: dict[str, list[float]] = {}
    switches: dict[str, list[int]] = {}
    rss: dict[str, float] = {}
    counts: dict[str, tuple[int, int, int]] = {}
    warm(src, before)
    with tempfile.TemporaryDirectory(dir=OUT, prefix="export-run-") as tmp:
        for _ in range(rounds):
            for name, argv, where, extra in _steps(db, Path(tmp), tokenizer, before, src):
                secs, used, peak, out, usage = _run(argv, where, extra)
                wall.setdefault(name, []).append(secs)
                cpu.setdefault(name, []).append(used)
                system.setdefault(name, []).append(usage.ru_stime)
                switches.setdefault(name, []).append(usage.ru_nvcsw)
                rss[name] = max(rss.get(name, 0.0), peak)
                if name != "store read (baseline)":
                    summary = orjson.loads(out)
                    written = sum(Path(f).stat().st_size for f in summary["files"].values())
                    rows = sum(summary["rows"].values())
                    counts[name] = (summary["facts_read"], rows, written)
                    shutil.rmtree(Path(summary["output"]))
                else:
                    counts[name] = (int(out), 0, 0)
    return [
        Step(
            n,
            statistics.median(t),
            statistics.median(cpu[n]),
            statistics.median(system[n]),
            round(statistics.median(switches[n])),
            rss[n],
            *counts[n],
        )
        for n, t in wall.items()
    ]


def _print(title: str, steps: list[Step]) -> None:
    base, base_cpu = steps[0].secs, steps[0].cpu
    print(title)
    print(
        f"{'step':<34}{'wall s':>8}{'cpu s':>8}{'sys s':>7}{'switches':>10}{'facts/s':>10}"
        f"{'rows/s':>10}"
        f"{'rows/cpu-s':>12}{'× baseline':>12}{'× by CPU':>10}{'peak RSS MB':>13}"
        f"{'output GB':>11}"
    )
    for st in steps:
        rate = f"{st.rows / st.secs:,.0f}" if st.rows else "-"
        per_cpu = f"{st.rows / st.cpu:,.0f}" if st.rows else "-"
        out = f"{st.size / 1e9:.2f}" if st.size else "-"
        print(
            f"{st.name:<34}{st.secs:>8.1f}{st.cpu:>8.1f}{st.sys:>7.1f}{st.switches:>10,}"
            f"{st.facts / st.secs:>10,.0f}{rate:>10}"
            f"{per_cpu:>12}{st.secs / base:>12.2f}{st.cpu / base_cpu:>10.2f}{st.rss:>13.0f}"
            f"{out:>11}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calls", type=int, default=1_000_000, help="facts in the main store")
    ap.add_argument(
        "--small", type=int, default=100_000, help="facts in the second store (0: none)"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", help="also export with lithify from this src folder, interleaved")
    ap.add_argument(
        "--src", help="lithify from this src folder for the other runs (default: the installed one)"
    )
    ap.add_argument(
        "--stages",
        type=int,
        metavar="CALLS",
        help="only: where the time goes, stage by stage, on a store of CALLS calls",
    )
    ap.add_argument(
        "--parts",
        type=int,
        metavar="CALLS",
        help="only: the session read whole and in workers' parts, on a store of CALLS calls",
    )
    ap.add_argument(
        "--instructions",
        type=int,
        metavar="CALLS",
        help="only: instructions of a one-process export (valgrind), on a store of CALLS calls",
    )
    ap.add_argument(
        "--tokenizer",
        help="also export with --tokenizer (a folder, a cached name, or 'built': see above)",
    )
    ap.add_argument(
        "--page-size", type=int, default=PAGE_SIZE, help="the stores' SQLite page size (bytes)"
    )
    args = ap.parse_args()
    if args.parts:
        db, note = store_for(args.parts, args.page_size)
        print(note, flush=True)
        load = os.getloadavg()[0]
        parts(db, args.rounds, args.before, args.src)
        print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
        return
    if args.instructions:
        db, note = store_for(args.instructions, args.page_size)
        print(note, flush=True)
        instructions(db, args.before, args.src)
        return
    if args.stages:
        db, note = store_for(args.stages, args.page_size)
        print(note, flush=True)
        load = os.getloadavg()[0]
        stages(db, args.rounds, args.src)
        print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
        return
    tokenizer = args.tokenizer
    if tokenizer == "built":
        tokenizer = str(built_tokenizer())
    sizes = [args.calls] + ([args.small] if args.small and args.small != args.calls else [])
    runs: dict[int, list[Step]] = {}
    for calls in sorted(sizes):
        db, note = store_for(calls, args.page_size)
        print(note, flush=True)
        load = os.getloadavg()[0]
        runs[calls] = bench(db, args.rounds, tokenizer, args.before, args.src)
        title = (
            f"{calls:,} calls in {calls // CALLS_PER_SESSION:,} sessions, "
            f"median of {args.rounds} rounds; load average {load:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end ({os.cpu_count()} CPUs)"
        )
        _print(title, runs[calls])
        if tokenizer is not None:
            by = {st.name: st for st in runs[calls]}
            plain, counted = by["export sft → jsonl"], by["export sft → jsonl, tokens"]
            print(
                f"--tokenizer: {counted.rows / counted.secs:,.0f} rows/s against "
                f"{plain.rows / plain.secs:,.0f} without "
                f"({plain.secs / counted.secs * counted.rows / plain.rows:.2f}×)"
            )
        print(flush=True)
    if len(runs) == 2:
        small, big = sorted(runs)
        print(f"peak RSS, {small:,} → {big:,} calls ({big // small}× as many):")
        for a, b in zip(runs[small], runs[big], strict=True):
            print(f"  {a.name:<34}{a.rss:>6.0f} MB → {b.rss:.0f} MB ({b.rss / a.rss:.2f}×)")


if __name__ == "__main__":
    main()
