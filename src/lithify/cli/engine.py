"""``--engine ray`` (docs/scale.md): Ray, an optional extra, connected for one command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lithify.cli.exits import Exit
from lithify.cli.options import err, leave, option

engine_option = option(
    "--engine", default="local", help="local, or ray: run on a Ray cluster (docs/scale.md)."
)
ray_address_option = option(
    "--ray-address", help="Ray cluster to join (default: start a local Ray).", envvar="RAY_ADDRESS"
)
RAY_EXTRA = "pip install 'lithify[ray]'"


class RayMissing(RuntimeError):
    """``--engine ray`` without Ray Data installed."""

    def __init__(self) -> None:
        super().__init__(f"--engine ray needs Ray Data: {RAY_EXTRA}")


@contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """Ray, connected: to the cluster at ``address`` (else ``RAY_ADDRESS``), else to a local
    Ray of ``workers`` CPUs started here and stopped on leaving (a Ray this process is
    already connected to is used as it is). Raises ``RayMissing`` without the extra."""
    try:
        import ray
        import ray.data  # the extra installs both; a bare ray lacks Data's dependencies
    except ImportError:
        raise RayMissing() from None
    address = address or os.environ.get("RAY_ADDRESS") or None
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, log_to_driver=False, include_dashboard=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the command shows its own
    ctx.print_on_execution_start = False
    # Shuffles by tasks, not by long-lived aggregator actors: no start-up cost on small inputs,
    # and a task that dies is simply run again.
    ctx.shuffle_strategy = "sort_shuffle_pull_based"
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def check_engine(engine: str) -> bool:
    """Whether ``engine`` is ray (exit 2 for one that is neither)."""
    if engine not in ("local", "ray"):
        err.print("[red]--engine must be local or ray[/]")
        leave(Exit.USAGE)
    return engine == "ray"
