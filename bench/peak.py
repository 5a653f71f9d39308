"""A child process's own peak RSS, for the benchmarks that run `lithify` in a child.

The child reports its VmHWM on stderr at exit. Its rusage (``wait4``, ``RUSAGE_CHILDREN``)
would not do: Linux carries into a child's ``ru_maxrss`` the pages of the process that started
it, so a benchmark holding a big table, or one that just generated a store, sees every child
as big as itself.
"""

from __future__ import annotations

import sys

_REPORT = """
import atexit, sys

def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write(line)

atexit.register(_peak)
"""

_LITHIFY = """
from lithify.cli import main
sys.argv = ["lithify", *sys.argv[1:]]
main()
"""


def lithify(*args: str) -> list[str]:
    """The argv of `lithify ARGS…` that reports its peak at exit."""
    return [sys.executable, "-c", _REPORT + _LITHIFY, *args]


def python(code: str, *args: str) -> list[str]:
    """The argv of a Python snippet that reports its peak at exit."""
    return [sys.executable, "-c", _REPORT + code, *args]


def parse_mb(stderr: bytes) -> float:
    """The reported peak, in MB (the last report: a child's child may report too)."""
    return int(stderr.decode(errors="replace").rsplit("VmHWM:", 1)[1].split()[0]) / 1024
