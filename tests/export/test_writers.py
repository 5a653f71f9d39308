"""Writing: determinism, the train/eval split, atomic files, Parquet, and `datasets` loading."""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import orjson
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.derive.sessions import sort_facts
from lithify.export import ExportOptions, Selection, export, from_store, plain, writers
from lithify.export.rows import Row
from lithify.model import InferenceCall
from lithify.store import FactFilter, open_store
from tests.export.helpers import read_rows, run_export, tool_session, user
from tests.export.test_corpus_export import corpus

KINDS = [
    {"kind": "sft"},
    {"kind": "sft", "profile": "openai"},
    {"kind": "nemo-gym", "profile": "nemo-gym"},
    {"kind": "dpo", "profile": "trl"},
    {"kind": "rl"},
]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("opts", KINDS, ids=lambda o: "-".join(o.values()))
def test_shuffled_facts_give_byte_identical_files(
    tmp_path: Path, fmt: str, opts: dict[str, str]
) -> None:
    facts, fb = corpus()
    outputs = []
    for seed in range(3):
        shuffled, shuffled_fb = list(facts), list(fb)
        random.Random(seed).shuffle(shuffled)
        random.Random(seed).shuffle(shuffled_fb)
        out = tmp_path / str(seed)
        run_export(shuffled, out, shuffled_fb, fmt=fmt, eval_fraction=0.3, **opts)
        outputs.append(_files(out))
    # Rows, digests, card and manifest: every file an export writes.
    want = ["README.md", f"eval.{fmt}", "facts.sha256", "manifest.json", f"train.{fmt}"]
    assert sorted(outputs[0]) == want
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0][f"train.{fmt}"]  # not trivially equal


def test_stores_filled_in_different_orders_export_the_same_bytes(tmp_path: Path) -> None:
    # The corpus holds calls captured twice (span and log event, two instrumentations sharing
    # response ids): the store keeps both captures and reads back the one the capture rule
    # keeps, whatever the order (docs/store.md), as fact files do.
    facts, fb = corpus()
    results = []
    for seed in range(2):
        shuffled = list(facts)
        random.Random(seed).shuffle(shuffled)
        with open_store(f"sqlite://{tmp_path / f'{seed}.db'}") as store:
            for i in range(0, len(shuffled), 7):  # several batches, in a different order
                store.insert_facts(shuffled[i : i + 7])
            store.insert_feedback(list(reversed(fb)) if seed else fb)
            out = tmp_path / f"out{seed}"
            export(
                from_store(store, FactFilter()), out, ExportOptions(kind="sft", eval_fraction=0.3)
            )
        results.append(_files(out))
    run_export(facts, tmp_path / "files", fb, kind="sft", eval_fraction=0.3)
    assert results[0] == results[1] == _files(tmp_path / "files")


def _sessions(n: int) -> list[InferenceCall]:
    """n sessions; every third asks the same question, so prompts repeat across sessions."""
    out = []
    for i in range(n):
        calls = tool_session(f"s{i:03d}", answer=f"Answer {i}.")
        if i % 3:
            calls = [
                InferenceCall(
                    **{
                        **{f: getattr(c, f) for f in c.__struct_fields__},
                        "input_messages": [user(f"Question {i}"), *c.input_messages[2:]],
                    }
                )
                for c in calls
            ]
        out.extend(calls)
    return out


def test_split_keeps_sessions_whole_and_prompts_on_one_side(tmp_path: Path) -> None:
    summary = run_export(_sessions(90), tmp_path, kind="sft", eval_fraction=0.4)
    train = read_rows(tmp_path / "train.jsonl")
    evals = read_rows(tmp_path / "eval.jsonl")
    assert train and evals
    assert all(r["metadata"]["split"] == "train" for r in train)
    assert all(r["metadata"]["split"] == "eval" for r in evals)
    train_sessions = {r["metadata"]["session_id"] for r in train}
    eval_sessions = {r["metadata"]["session_id"] for r in evals}
    assert not train_sessions & eval_sessions

    def prompt(r: dict[str, Any]) -> bytes:
        return orjson.dumps([r["messages"][:-1], r["tools"]])

    assert not {prompt(r) for r in train} & {prompt(r) for r in evals}
    # The shared first turn ("Weather in Paris?") went to train; eval copies were dropped.
    dropped = summary.skipped["eval_prompt_in_train"]
    assert dropped > 0
    assert summary.rows == {"train": len(train), "eval": len(evals)}


def _failing(facts: list[InferenceCall], after: int) -> Iterator[InferenceCall]:
    for i, f in enumerate(facts):
        if i == after:
            raise RuntimeError("the store went away")
        yield f


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_failed_export_leaves_the_earlier_one_untouched(tmp_path: Path, fmt: str) -> None:
    facts = sort_facts(_sessions(30))
    run_export(facts, tmp_path, kind="sft", fmt=fmt, eval_fraction=0.3)
    before = _files(tmp_path)
    with pytest.raises(RuntimeError):
        export(Selection(plain(_failing(facts, 25))), tmp_path, ExportOptions(kind="sft", fmt=fmt))
    assert _files(tmp_path) == before  # same files, same bytes, no temporary files left


def test_parquet_streams_row_groups_and_equals_jsonl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writers, "ROW_GROUP", 5)
    facts = _sessions(30)
    run_export(facts, tmp_path / "j", kind="sft")
    run_export(facts, tmp_path / "p", kind="sft", fmt="parquet")
    rows = read_rows(tmp_path / "j" / "train.jsonl")
    pf = pq.ParquetFile(tmp_path / "p" / "train.parquet")
    assert pf.metadata.num_row_groups == -(-len(rows) // 5) > 1
    assert pf.schema_arrow.names == ["messages", "tools", "metadata"]
    table = pf.read().to_pylist()
    assert [{k: orjson.loads(v) for k, v in r.items()} for r in table] == rows


def test_nemo_gym_parquet_reward_column(tmp_path: Path) -> None:
    facts, fb = corpus()
    run_export(facts, tmp_path, fb, kind="nemo-gym", fmt="parquet")
    table = pq.read_table(tmp_path / "train.parquet")
    assert table.schema.field("reward").type == "double"
    assert table.num_rows > 0 and table.column("reward").null_count < table.num_rows


def test_datasets_loads_jsonl_and_parquet(tmp_path: Path) -> None:
    facts, fb = corpus()
    for fmt in ("jsonl", "parquet"):
        run_export(facts, tmp_path / fmt, fb, kind="sft", fmt=fmt)
        builder = "json" if fmt == "jsonl" else "parquet"
        ds = datasets.load_dataset(
            builder,
            data_files={"train": str(tmp_path / fmt / f"train.{fmt}")},
            cache_dir=str(tmp_path / "cache"),
        )["train"]
        rows = read_rows(tmp_path / "jsonl" / "train.jsonl")
        assert ds.num_rows == len(rows)
        first = ds[0]
        messages = first["messages"] if fmt == "jsonl" else orjson.loads(first["messages"])
        assert messages[0]["role"] == rows[0]["messages"][0]["role"]


_ROW = st.tuples(
    st.binary(min_size=1, max_size=40).map(lambda b: orjson.dumps({"t": b.hex()})),
    st.sampled_from(["train", "eval"]),
    st.sampled_from([bytes([i]) * 16 for i in range(4)]),  # few prompts: evals meet trains
)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.tuples(st.booleans(), st.lists(_ROW, max_size=6)), max_size=6))
def test_train_rows_as_lines_write_what_rows_one_by_one_write(
    chunks: list[tuple[bool, list[tuple[bytes, str, bytes]]]],
) -> None:
    # Workers hand a part's train rows over as one block of lines (``Lines``) and the eval rows
    # one by one; the files, their hashes and the eval rows left out are those of ``write``.
    def row(encoded: bytes, split: str, prompt: bytes) -> Row:
        return Row({}, encoded, split, prompt, [])

    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for as_lines in (False, True):
            out = Path(tmp) / str(as_lines)
            with writers.SplitWriter(out, "jsonl", writers.columns_for("sft", "messages")) as w:
                for block, rows in chunks:
                    train = [r for r in rows if r[1] == "train"]
                    if as_lines and block:
                        data = b"".join(e + b"\n" for e, _, _ in train)
                        prompts = b"".join(p for _, _, p in train)
                        w.write_lines(writers.Lines(bytearray(data), len(train), prompts))
                        rows = [r for r in rows if r[1] != "train"]
                    for r in rows:
                        w.write(row(*r))
            files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
            results.append((files, w.written, w.hashed, w.eval_prompt_in_train, w.left_out))
        assert results[0] == results[1]


def test_jsonl_rows_are_synced_to_disk_as_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # So that the fsync at the end does not wait for the whole file: at least one sync per
    # _SYNC bytes written, before the file is closed.
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append(fd) or real(fd))
    monkeypatch.setattr(writers, "_BUFFER", 100)
    monkeypatch.setattr(writers, "_SYNC", 1000)
    encoded = orjson.dumps({"t": "x" * 91})  # 99 bytes, 100 with its newline
    with writers.SplitWriter(tmp_path, "jsonl", writers.columns_for("sft", "messages")) as w:
        for _ in range(100):
            w.write(Row({}, encoded, "train", bytes(16), []))
    # One a 1,000 bytes as they were written (the fsync at the end is not one of them).
    assert len(synced) == 10
    assert (tmp_path / "train.jsonl").read_bytes() == (encoded + b"\n") * 100
