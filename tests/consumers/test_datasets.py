"""``datasets`` (the version TRL runs with, in .venv-consumers-trl) loads every export, JSONL and
Parquet, of every row kind and profile, and gives back exactly the rows lithify wrote.

"Exactly" is type-strict (tests.consumers.pipeline.canon): Arrow infers one schema per column,
and a loader that filled missing keys with nulls, turned ``1`` into ``1.0`` or a boolean into a
number would hand the trainer rows that differ from the file. One difference is the table's and
allowed: a top-level key some rows lack (``reward`` of NeMo Gym rows without feedback) is a
column, null in those rows. Inside the nested values (messages, tools, items) nothing may
appear, vanish or change type. Parquet exports carry nested values
as JSON strings (docs/export.md), so a Parquet row, its JSON columns decoded, must equal the same
row of the JSONL export made with the same options.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.consumers.pipeline import EXPORTS, PARQUET_TWINS, Consumers, canon

pytestmark = pytest.mark.consumers

JSONL = [k for k in EXPORTS if k not in PARQUET_TWINS]


def _loaded(report: dict[str, Any], key: str) -> dict[str, list[dict[str, Any]]]:
    result = report["datasets"][key]
    assert "error" not in result, f"datasets could not load {key}: {result.get('traceback')}"
    return result["splits"]


def _columns_only(got: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    """``got`` without the null columns that ``want`` does not have (see the module doc)."""
    return {k: v for k, v in got.items() if k in want or v is not None}


def _splits(consumers: Consumers, key: str) -> list[str]:
    return [s for s in ("train", "eval") if consumers.summaries[key]["rows"].get(s)]


def test_every_export_is_offered_to_datasets(consumers: Consumers, trl_report: dict) -> None:
    assert set(trl_report["datasets"]) == set(EXPORTS)


@pytest.mark.parametrize("key", JSONL)
def test_datasets_loads_jsonl_rows_unchanged(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    loaded = _loaded(trl_report, key)
    assert sorted(loaded) == sorted(_splits(consumers, key))
    for split, rows in loaded.items():
        written = consumers.rows(key, split)
        assert len(rows) == len(written) == consumers.summaries[key]["rows"][split]
        for n, (got, want) in enumerate(zip(rows, written, strict=True)):
            got = _columns_only(got, want)
            assert canon(got) == canon(want), f"{key}/{split} row {n} changed when loaded"


@pytest.mark.parametrize("key", list(PARQUET_TWINS))
def test_datasets_loads_parquet_rows_equal_to_the_jsonl_export(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    twin = PARQUET_TWINS[key]
    assert sorted(EXPORTS[key]) == sorted((*EXPORTS[twin], "--format", "parquet"))
    loaded = _loaded(trl_report, key)
    assert sorted(loaded) == sorted(_splits(consumers, twin))
    for split, rows in loaded.items():
        written = consumers.rows(twin, split)
        assert len(rows) == len(written)
        for n, (got, want) in enumerate(zip(rows, written, strict=True)):
            got = _columns_only(got, want)
            assert list(got) == list(want), f"{key}/{split}: columns differ from the JSONL keys"
            decoded = {}
            for column, value in got.items():
                if column == "images":
                    # Image bytes, not JSON text: the JSONL twin's files, by name and content
                    # (run_trl.py reports each as its name and the SHA-256 of its bytes).
                    assert [f"images/{i['path']}" for i in value] == want[column]
                    assert all(i["path"].startswith(i["sha256"] + ".") for i in value)
                    decoded[column] = want[column]
                elif isinstance(want[column], dict | list):
                    # Nested values are JSON text columns: no null-filled keys across rows.
                    assert isinstance(value, str), (key, column, type(value))
                    decoded[column] = json.loads(value)
                else:
                    decoded[column] = value
            assert canon(decoded) == canon(want), f"{key}/{split} row {n} differs from {twin}"


@pytest.mark.parametrize("key", list(EXPORTS))
def test_datasets_loads_the_export_folder_by_its_card_alone(
    consumers: Consumers, trl_report: dict, key: str
) -> None:
    """``load_dataset(OUT_DIR)``, no builder, no files: the card's ``configs`` find the splits
    that hold rows, its features type them, and they are the rows ``load_dataset`` reads from
    the files named."""
    result = trl_report["folders"][key]
    assert "error" not in result, f"datasets could not load {key}: {result.get('traceback')}"
    by_folder = result["splits"]
    assert sorted(by_folder) == sorted(_splits(consumers, key))
    by_files = _loaded(trl_report, key)
    for split, rows in by_folder.items():
        assert len(rows) == consumers.summaries[key]["rows"][split]
        assert canon(rows) == canon(by_files[split]), f"{key}/{split}"
    if key in PARQUET_TWINS:  # the file's own schema, JSON columns as text
        assert result["features"] == trl_report["datasets"][key]["features"]
        return
    # The card declares each JSON column datasets.Json: no chunk or split is typed from another.
    for split, features in result["features"].items():
        typed = features.replace("'images': List(Value('string'))", "")  # paths, cast by the card
        assert "List(" not in typed and "Value('string')" not in typed, (key, split)
        assert features.count("Json(decode=True)") >= 2, (key, split)
