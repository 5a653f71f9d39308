"""Benchmark: what `lithify` costs before any work, as whole processes.

    .venv/bin/python bench/startup.py                        # the table (≈1 minute)
    .venv/bin/python bench/startup.py --before ../old/src    # and another checkout, interleaved

Times `lithify --version`, `lithify --help` and `lithify convert` of one small file (a corpus
OTLP/JSON request of one chat span with a tool call, to a fact file) beside `python -c pass`, the
interpreter's own start, measured in the same run. Each round runs every command once, in turn,
so a slow stretch of a shared machine falls on the baseline and the commands alike; a figure is
the median over the rounds, a ratio the median of each round's ratio to that round's baseline.
``--before SRC`` runs the same commands from another checkout's ``src`` (PYTHONPATH) in the same
rounds. Then, once per command, ``python -X importtime``: the top-level imports that cost most.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL = (
    Path(__file__).resolve().parents[1]
    / "tests"
    / "corpus"
    / "otlp"
    / "util_genai_openai_v2_chat_tool_call.otlp.json"
)

# The console script's own code (pyproject's `lithify = "lithify.cli:main"`), run by `python -c`
# so that -X importtime can be given.
_LITHIFY = "import sys\nfrom lithify.cli import main\nsys.argv[0] = 'lithify'\nmain()\n"


def _commands(out: Path) -> dict[str, list[str]]:
    return {
        "lithify --version": ["--version"],
        "lithify --help": ["--help"],
        "lithify convert (one small file)": ["convert", str(SMALL), "-o", str(out)],
    }


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _env(src: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITHIFY_")}
    # An installed lithify runs from compiled bytecode: let the warm-up write it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["COLUMNS"] = "100"  # the help's width, whatever the terminal
    if src:
        env["PYTHONPATH"] = str(Path(src).resolve())
    else:
        env.pop("PYTHONPATH", None)
    return env


def measure(rounds: int, before: str | None, out: Path) -> list[tuple[str, float, float, float]]:
    """(name, median wall s, median CPU s, median ratio of wall to `python -c pass`)."""
    runs: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"], _env(None))
    ]
    for name, args in _commands(out).items():
        runs.append((name, [sys.executable, "-c", _LITHIFY, *args], _env(None)))
        if before:
            runs.append(
                (f"  before: {name}", [sys.executable, "-c", _LITHIFY, *args], _env(before))
            )
    walls: list[list[float]] = [[] for _ in runs]
    cpus: list[list[float]] = [[] for _ in runs]
    for argv_env in runs:  # warm the page cache and the bytecode caches
        _run(argv_env[1], argv_env[2])
    for _ in range(rounds):
        for i, (_, argv, env) in enumerate(runs):
            wall, cpu = _run(argv, env)
            walls[i].append(wall)
            cpus[i].append(cpu)
    base = walls[0]
    return [
        (
            name,
            statistics.median(w),
            statistics.median(c),
            statistics.median(x / b for x, b in zip(w, base, strict=True)),
        )
        for (name, _, _), w, c in zip(runs, walls, cpus, strict=True)
    ]


def top_imports(args: list[str], n: int) -> list[tuple[str, float]]:
    """The ``n`` top-level imports of `lithify ARGS…` that cost most (cumulative ms, from
    ``-X importtime``: nested imports are counted in the module that made them)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _LITHIFY, *args],
        env=_env(None),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith("  "):  # an import made by another module
            continue
        rows.append((name.strip(), int(cumulative) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--before", help="also run lithify from this checkout's src, interleaved")
    ap.add_argument("--top", type=int, default=6, help="top-level imports listed per command")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "facts.jsonl"
        load = os.getloadavg()
        rows = measure(args.rounds, args.before, out)
        load_end = os.getloadavg()
        print(
            f"whole processes, median of {args.rounds} interleaved rounds; load average "
            f"{load[0]:.2f} at the start, {load_end[0]:.2f} at the end ({os.cpu_count()} CPUs)"
        )
        print(f"{'command':<46}{'wall ms':>9}{'CPU ms':>8}{'× python -c pass':>18}")
        for name, wall, cpu, ratio in rows:
            print(f"{name:<46}{wall * 1000:>9.1f}{cpu * 1000:>8.1f}{ratio:>18.2f}")
        print()
        print("top-level imports by cumulative time (python -X importtime, one run each, ms)")
        for name, cmd_args in _commands(out).items():
            tops = ", ".join(f"{m} {ms:.0f}" for m, ms in top_imports(cmd_args, args.top))
            print(f"{name}: {tops}")


if __name__ == "__main__":
    main()
