"""The card's declared ``datasets`` features (export.card): with them ``load_dataset(OUT_DIR)``
gives back every row exactly as written, whatever structure first appears past ``datasets``'
first chunk of a file or only in the eval split (without them, that load fails)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import datasets
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.export import ExportOptions, export, from_facts
from lithify.export.card import render
from lithify.export.manifest import decode_manifest
from tests.export.helpers import corpus_facts
from tests.scale.facts import generated

# JSON values as rows hold them: keys that come and go, and 1, 1.0 and true apart.
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(-1e9, 1e9).map(lambda f: round(f, 6))  # datasets' Json: ten decimals
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
# SFT rows of the TRL profile: the columns the card declares, holding any JSON of their shape.
_ROW = st.fixed_dictionaries(
    {
        "messages": st.lists(
            st.dictionaries(st.sampled_from(["role", "content", "tool_calls"]), _JSON), max_size=3
        ),
        "tools": st.lists(_JSON, max_size=2),
        "metadata": st.dictionaries(st.text(max_size=3), _JSON, max_size=3),
    }
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, type for type (1, 1.0 and true differ; no key added or lost), floats
    within datasets' Json rounding (see the last test)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-10)
    return bool(a == b)


def _export_folder(tmp_path: Path, **options: Any) -> Path:
    """A real export: the corpus's calls, and generated sessions with scores (preference pairs
    and rewards)."""
    facts, fb = generated(3)
    out = tmp_path / "out"
    export(from_facts([*corpus_facts(), *facts], fb), out, ExportOptions(**options))
    return out


def _load(folder: Path, cache: Path) -> datasets.DatasetDict:
    return datasets.load_dataset(str(folder), cache_dir=str(cache))


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(train=st.lists(_ROW, min_size=1, max_size=6), eval_=st.lists(_ROW, min_size=1, max_size=6))
def test_any_rows_load_exactly_under_the_cards_features(
    tmp_path_factory: pytest.TempPathFactory,
    train: list[dict[str, Any]],
    eval_: list[dict[str, Any]],
) -> None:
    """A real card's header over rows of any JSON: each row back as written, value for value
    and type for type."""
    folder = _export_folder(
        tmp_path_factory.mktemp("card"), kind="sft", profile="trl", eval_fraction=0.5
    )
    card = (folder / "README.md").read_text()
    assert card.count("dtype: json") == 3
    for split, rows in (("train", train), ("eval", eval_)):
        (folder / f"{split}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    ds = _load(folder, tmp_path_factory.mktemp("cache"))
    for split, rows in (("train", train), ("eval", eval_)):
        loaded = ds[split].to_list()
        assert len(loaded) == len(rows), split
        assert all(_same(a, b) for a, b in zip(loaded, rows, strict=True)), split


def test_a_structure_first_seen_past_the_first_chunk_or_in_eval_loads(tmp_path: Path) -> None:
    """What fails without the declaration: a tool call after datasets' first chunk (10 MB) of
    train, and an argument name only eval has."""
    folder = _export_folder(tmp_path, kind="sft", profile="trl", eval_fraction=0.5)
    plain = {
        "messages": [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": "y"}],
        "tools": [],
        "metadata": {},
    }
    call = {"type": "function", "function": {"name": "f", "arguments": {"city": "Paris"}}}
    tooled = {**plain, "messages": [{"role": "assistant", "tool_calls": [call]}]}
    train = [plain] * 30_000 + [tooled]  # ≈13 MB
    other = {**call, "function": {"name": "g", "arguments": {"day": 3}}}
    evaluated = [{**plain, "messages": [{"role": "assistant", "tool_calls": [other]}]}]
    for split, rows in (("train", train), ("eval", evaluated)):
        (folder / f"{split}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert (folder / "train.jsonl").stat().st_size > 10 * 1024 * 1024
    card = (folder / "README.md").read_text()
    head, body = card.split("dataset_info:\n", 1)
    (folder / "README.md").write_text(head + body[body.index("tags:") :])
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        _load(folder, tmp_path / "cache-without")
    (folder / "README.md").write_text(card)
    ds = _load(folder, tmp_path / "cache")
    assert _same(ds["train"][-1]["messages"], tooled["messages"])  # no key added, none lost
    assert ds["eval"][0]["messages"][0]["tool_calls"][0]["function"]["arguments"] == {"day": 3}


@pytest.mark.parametrize(
    ("kind", "profile"),
    [
        ("sft", "trl"),
        ("sft", "openai"),
        ("dpo", "trl"),
        ("nemo-gym", "nemo-gym"),
        ("rl", "canonical"),
    ],
)
def test_an_export_loads_by_its_card_exactly(tmp_path: Path, kind: str, profile: str) -> None:
    folder = _export_folder(tmp_path, kind=kind, profile=profile, eval_fraction=0.5)
    manifest = decode_manifest((folder / "manifest.json").read_bytes())
    assert (folder / "README.md").read_text() == render(manifest)
    ds = _load(folder, tmp_path / "cache")
    assert sum(len(ds[s]) for s in ds) > 0
    for split in ds:
        written = [
            orjson.loads(line) for line in (folder / f"{split}.jsonl").read_bytes().splitlines()
        ]
        loaded = [
            {k: v for k, v in r.items() if v is not None or k in w}
            for r, w in zip(ds[split].to_list(), written, strict=True)
        ]
        assert all(_same(a, b) for a, b in zip(loaded, written, strict=True)), split


def test_datasets_rounds_a_json_columns_floats_to_ten_decimals(tmp_path: Path) -> None:
    """A limit of datasets' Json feature (it encodes values with pandas' ujson, ten decimals),
    written down in docs/export.md: the file holds the float exactly, the loaded row rounded."""
    folder = _export_folder(tmp_path, kind="sft", profile="trl")
    row = {"messages": [], "tools": [], "metadata": {"score": 1 / 3, "big": 2**60}}
    (folder / "train.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    loaded = _load(folder, tmp_path / "cache")["train"][0]["metadata"]
    assert loaded["big"] == 2**60 and loaded["score"] != 1 / 3
    assert math.isclose(loaded["score"], 0.3333333333, rel_tol=1e-15)
