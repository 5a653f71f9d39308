"""One run of the consumer pipeline per test session, shared by the xdist workers."""

from __future__ import annotations

import fcntl
import os
import pickle
import traceback
from pathlib import Path

import pytest

from tests.consumers.pipeline import Consumers, run


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "consumers: real trainers and NeMo Gym read lithify's exports (own venvs)"
    )


@pytest.fixture(scope="session")
def consumers(tmp_path_factory: pytest.TempPathFactory) -> Consumers:
    reuse = os.environ.get("LITHIFY_CONSUMERS_REUSE")
    if reuse:
        # Iterating on these tests: read a finished run's folder instead of running it again.
        return Consumers.load(Path(reuse))
    base = tmp_path_factory.getbasetemp()
    # Under xdist every worker has its own basetemp inside the session's: share that one.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "consumers"
    done, failed = shared / "consumers.pickle", shared / "consumers.failed"
    with open(shared / "consumers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists() and not failed.exists():
            try:
                done.write_bytes(pickle.dumps(run(root)))
            except Exception:
                failed.write_text(traceback.format_exc())
    if failed.exists():
        pytest.fail(f"the consumer pipeline failed:\n{failed.read_text()}", pytrace=False)
    result: Consumers = pickle.loads(done.read_bytes())
    return result


@pytest.fixture(scope="session")
def trl_report(consumers: Consumers) -> dict:
    if consumers.trl is None:
        pytest.fail(consumers.trl_error or "no TRL report", pytrace=False)
    return consumers.trl


@pytest.fixture(scope="session")
def nemo_gym_report(consumers: Consumers) -> dict:
    if consumers.nemo_gym is None:
        pytest.fail(consumers.nemo_gym_error or "no NeMo Gym report", pytrace=False)
    return consumers.nemo_gym
