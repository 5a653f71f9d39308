"""Golden facts for every corpus payload and every recorded exchange.

Each corpus file (or request/response pair) converts to the facts in ``tests/golden/``, each
recorded exchange (``tests/recorded/``) to those in ``tests/golden/recorded/``; the goldens
were read and checked by hand against docs/canonical.md before they were committed. To
regenerate after an intended change, run ``LITHIFY_UPDATE_GOLDENS=1 pytest tests/test_golden.py``
and review the diff line by line before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from lithify.ingest.files import read_file, read_pair
from lithify.model import InferenceCall
from tests.conftest import CORPUS, GOLDEN, RECORDED
from tests.helpers import assert_valid_messages, result_line

UPDATE = bool(os.environ.get("LITHIFY_UPDATE_GOLDENS"))

# Single files: every corpus payload except the semconv attribute-value cases (bare values, tested
# in test_genai.py) and the NeMo Gym rollouts (an export target, not a capture source).
SINGLE = sorted(
    p.relative_to(CORPUS).as_posix()
    for p in CORPUS.rglob("*")
    if p.is_file()
    and p.name != "SOURCES.md"
    and not p.name.startswith("semconv_case_")
    and p.parent.name != "nemo-gym"
)

# Exchanges recorded for this project (tests/recorded/SOURCES.md), one exchange document each.
RECORDED_FILES = sorted(
    p.relative_to(RECORDED).as_posix() for p in RECORDED.rglob("*.exchange.json")
)

# Request/response pairs that belong to one exchange give one fact.
PAIRS = sorted(
    (
        req.relative_to(CORPUS).as_posix(),
        resp.relative_to(CORPUS).as_posix(),
    )
    for req in CORPUS.rglob("*.request.json")
    for resp in [
        req.with_name(req.name.replace(".request.json", ".response.json")),
        req.with_name(req.name.replace(".request.json", ".response.sse")),
        req.with_name(req.name.replace(".request.json", ".error.json")),
    ]
    if resp.exists()
)


def _check(golden: Path, results: list[object]) -> None:
    got = [result_line(r) for r in results]
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2) + b"\n")
        return
    assert golden.exists(), f"no golden file {golden}; generate it and check it by hand"
    expected = orjson.loads(golden.read_bytes())
    assert len(got) == len(expected), f"{golden.name}: {len(got)} results, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"{golden.name} result {i} differs"


def _check_file(path: Path, golden: Path) -> None:
    results = [located.result for located in read_file(path)]
    assert results, path
    for r in results:
        if isinstance(r, InferenceCall):
            assert_valid_messages(r)
    _check(golden, results)


@pytest.mark.parametrize("rel", SINGLE)
def test_corpus_file(rel: str) -> None:
    _check_file(CORPUS / rel, GOLDEN / f"{rel}.json")


@pytest.mark.parametrize("rel", RECORDED_FILES)
def test_recorded_exchange(rel: str) -> None:
    _check_file(RECORDED / rel, GOLDEN / "recorded" / f"{rel}.json")


@pytest.mark.parametrize(("req", "resp"), PAIRS, ids=["+".join(p) for p in PAIRS])
def test_corpus_pair(req: str, resp: str) -> None:
    result = read_pair(CORPUS / req, CORPUS / resp).result
    if isinstance(result, InferenceCall):
        assert_valid_messages(result)
    name = req.removesuffix(".request.json") + ".exchange"
    _check(GOLDEN / f"{name}.json", [result])
