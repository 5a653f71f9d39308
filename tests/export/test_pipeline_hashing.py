"""What the export hashes as it goes, over more than one background batch: the fact lines of
``facts.sha256`` (handed to the hashing thread in batches) and the JSONL files (hashed as they
are written, not read back for the manifest) are what hashing the facts and the files gives."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from lithify.export.manifest import FactDigests, call_line
from lithify.export.rows import Row
from lithify.export.writers import SplitWriter, columns_for
from tests.export.helpers import assistant, fact, run_export, text, user


def _facts(n: int, size: int) -> list:
    """``n`` one-call sessions of about ``size`` bytes of text each."""
    return [
        fact(f"c-{i:04d}", [user(f"{i} " + "x" * size)], [assistant(text(f"{i}."))],
             session=f"s-{i:04d}")
        for i in range(n)
    ]  # fmt: skip


def test_fact_lines_are_each_facts_line_in_order_across_batches() -> None:
    facts = _facts(300, 20_000)  # ≈ 6 MB of JSON: several batches
    digests = FactDigests()
    assert list(digests.watch((f, None) for f in facts)) == facts
    lines = b"".join(digests.chunks())
    assert lines == b"".join(call_line(f) for f in facts)
    assert digests.count == 300
    assert digests.hash.hexdigest() == hashlib.sha256(lines).hexdigest()
    digests.spool.close()


def _row(i: int, split: str) -> Row:
    data = {"messages": [{"role": "user", "content": f"{i} " + "y" * 30_000}], "metadata": {}}
    return Row(data, orjson.dumps(data), split, i.to_bytes(16, "big"), [f"c-{i}"])


def test_jsonl_files_are_hashed_as_written(tmp_path: Path) -> None:
    writer = SplitWriter(tmp_path, "jsonl", columns_for("sft", "messages"))
    with writer:
        for i in range(200):  # ≈ 6 MB: several chunks written in the background
            writer.write(_row(i, "eval" if i % 3 == 0 else "train"))
    assert writer.written == {"train": 133, "eval": 67}
    for split in ("train", "eval"):
        data = (tmp_path / f"{split}.jsonl").read_bytes()
        assert writer.hashed[split] == (hashlib.sha256(data).hexdigest(), len(data))
        assert data.count(b"\n") == writer.written[split]


def test_parquet_files_are_read_back(tmp_path: Path) -> None:
    writer = SplitWriter(tmp_path, "parquet", columns_for("sft", "messages"))
    with writer:
        writer.write(_row(1, "train"))
    assert writer.hashed == {}


def test_the_manifest_holds_the_hashes_of_large_files(tmp_path: Path) -> None:
    run_export(_facts(120, 30_000), tmp_path, kind="sft", eval_fraction=0.5)
    manifest = orjson.loads((tmp_path / "manifest.json").read_bytes())
    for split in ("train", "eval"):
        data = (tmp_path / f"{split}.jsonl").read_bytes()
        assert len(data) > 1 << 20  # more than one chunk of the writer
        entry = manifest["files"][f"{split}.jsonl"]
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["bytes"] == len(data)
