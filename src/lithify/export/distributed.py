"""The export on Ray Data (docs/scale.md): fact files → the identity rule → facts grouped by
session with Ray Data's shuffle → each session's rows by ``pipeline.derive_rows`` (the local
export's own per-session step) → sorted shards → the same ``train``/``eval`` files.

The output is the local export's, byte for byte, whatever the workers, the partitioning and
the order facts arrive in, because every step that sees more than one session is made
order-free or done once on the driver:

- the identity rule (``derive.sessions.resolve_facts``) ranks captures that share an id, and
  those may lie in different sessions and files: ids held by more than one capture are found
  by a distributed count, and only those captures (rare) are resolved together on the driver;
- each session (each call without one) is a group, derived alone, as the local export derives
  it; its rows carry the session's place in the local order (``session_order_key``) and their
  own index, and a distributed sort puts them back in that order;
- counts, the feedback targets met and DPO candidates come back per task and are added up in
  one builder (``RowBuilder.merge``), which then makes the pairs as the local export does;
- the merge feeds the sorted rows to the local ``SplitWriter``: eval rows whose prompt is a
  train prompt are left out there, over the whole export;
- with ``--tokenizer``, a task counts its rows (``export.tokens``: a row's count and any cut
  depend on its segment alone) and hands back a tally; the driver adds the tallies up
  (``TokenBudget.merge``), counts the pairs, and reports only the eval rows the writer kept.

Ray is an optional extra: this module imports it when it runs, on a Ray the caller connected
to (``cli.engine.ray_session``).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import os
import pickle
import shutil
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lithify.core.codec import Decoder, col, encode
from lithify.core.factfile import InputError, read_facts
from lithify.derive.feedback import FeedbackIndex
from lithify.derive.sessions import (
    DeriveStats,
    call_order_key,
    iter_sessions,
    resolve_facts,
    session_order_key,
)
from lithify.export.flags import Flagger, dropped_flags, note_flags
from lithify.export.manifest import (
    FactCounts,
    FactDigests,
    Provenance,
    call_line,
    publish,
    unpublish,
)
from lithify.export.media import IMAGES_DIR
from lithify.export.pipeline import (
    ExportOptions,
    counted,
    derive_rows,
    make_builder,
    note_tokens,
    summarize,
    token_budget,
)
from lithify.export.rows import Row
from lithify.export.source import left_out_of, matcher
from lithify.export.summary import ExportSummary
from lithify.export.tokens import (
    TextCounter,
    TokenBudget,
    TokenizerError,
    fingerprint,
    load_tokenizer,
)
from lithify.export.validate import RowInvalid
from lithify.export.writers import SplitWriter, columns_for, hold_folder, put_images
from lithify.model import Feedback, InferenceCall
from lithify.store import FactFilter, open_store

__all__ = ["ShardedExport", "export_ray"]

SHARDS = "shards"  # the folder of an export's shards, beside train/eval
MANIFEST = "manifest.json"  # in SHARDS, written last
# Bytes of facts per partition of the session shuffle, when not given: a reduce task holds its
# partition, so this (and the largest session) bounds a worker's memory, not the input's size.
_PARTITION_BYTES = 32 << 20
_PART_CALLS = 4096  # calls per part of a store a task reads and derives (whole sessions)
_BATCH = 1024  # rows a session task hands back at a time: a long session streams out


@dataclass
class ShardedExport:
    """What ``export_ray`` did beside the summary: the shard folder and its manifest."""

    summary: ExportSummary
    shards: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    # Each worker process that derived sessions → the most private memory it held at the end
    # of a session (its facts still held), in bytes.
    peaks: dict[int, int] = field(default_factory=dict)


# -- records ---------------------------------------------------------------------------------
# A fact travels as its lossless codec bytes with the keys the shuffle and the identity rule
# need; every record of one stage has the same columns.
_CALL, _FEEDBACK, _ERROR = "call", "feedback", "error"
_ROW, _FACT = "row", "fact"  # what the session step hands back: rows, and fact digest lines
_calls = Decoder(InferenceCall)
_feedback = Decoder(Feedback)


def _group_of(fact: InferenceCall) -> tuple[str, str]:
    """The shuffle key of a fact and its place in the local order (``session_order_key``):
    a session, or a call without one (each its own group), as comparable text."""
    if fact.session_id is not None:
        return "s" + col(fact.session_id), "0" + col(fact.session_id)
    sort_at, call_id = call_order_key(fact)
    # Column forms hold no NUL, so NUL separates the two keys without changing their order.
    return "c" + call_id, "1" + sort_at + "\x00" + call_id


def _call_record(fact: InferenceCall) -> dict[str, Any]:
    group, order = _group_of(fact)
    return {
        "kind": _CALL,
        "body": encode(fact),
        "group": group,
        "order": order,
        "icid": fact.inference_call_id,
        # "=" marks a response id, so that none ("") is told from an empty one.
        "mcid": "" if fact.model_call_id is None else "=" + fact.model_call_id,
        "file": 0,
    }


def _read_file(item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The records of one fact file, yielded as read (Ray cuts them into blocks as they come:
    a worker holds a block, not the file); a file that cannot be read ends with an error
    record, so the driver reports the first such file in argument order, as the local export
    does."""
    path, index = Path(item["path"]), int(item["index"])
    try:
        for _, fact in read_facts(path):
            if isinstance(fact, InferenceCall):
                yield _call_record(fact)
            else:
                yield {**_blank(_FEEDBACK), "body": encode(fact)}
    except InputError as e:
        yield {**_blank(_ERROR), "body": str(e).encode(), "file": index}


def _blank(kind: str) -> dict[str, Any]:
    return {"kind": kind, "body": b"", "group": "", "order": "", "icid": "", "mcid": "", "file": 0}


def _id_keys(batch: dict[str, Any]) -> dict[str, Any]:
    ids = [f"i{i}" for i in batch["icid"]] + [f"m{m}" for m in batch["mcid"] if m]  # m=…
    return {"id": ids}


# -- the per-session step ---------------------------------------------------------------------
@dataclass
class _Job:
    """What every session task needs: the options and the feedback, with the aliases of calls
    the identity rule renamed (``FeedbackIndex``); ``token`` names this content."""

    options: ExportOptions
    feedback: list[Feedback]
    aliases: dict[str, str]
    token: str = ""

    def __post_init__(self) -> None:
        h = hashlib.sha256(pickle.dumps(self.options))
        for fb in self.feedback:
            h.update(encode(fb))
        h.update(orjson.dumps(sorted(self.aliases.items())))
        self.token = h.hexdigest()


# Per worker process, the index of the job it last ran (tasks of one export share it; a worker
# that serves several exports builds each one's).
_indexes: dict[str, FeedbackIndex] = {}


# Per worker process, the tokenizer of the job it last counted: (tokenizer, its SHA-256, its text
# counter, which remembers the pieces it encoded). Loaded once per process, not per session.
_tokenizers: dict[str, tuple[Any, str, TextCounter]] = {}


def _budget(job: _Job, builder: Any) -> TokenBudget | None:
    """A session's token stage (``--tokenizer``), with this process's copy of the tokenizer;
    raises ``TokenizerError`` when this node does not have it."""
    name = job.options.tokenizer
    if name is None:
        return None
    held = _tokenizers.get(job.token)
    if held is None:
        _tokenizers.clear()
        tok = load_tokenizer(name)
        held = _tokenizers[job.token] = (tok, fingerprint(tok), TextCounter(tok))
    return token_budget(job.options, builder, *held)


def _index(job: _Job) -> FeedbackIndex:
    index = _indexes.get(job.token)
    if index is None:
        _indexes.clear()
        index = _indexes[job.token] = FeedbackIndex(job.feedback, job.aliases)
    return index


def _rows_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("kind", pa.string()),
            ("order", pa.string()),
            ("seq", pa.int64()),
            ("split", pa.string()),
            ("prompt", pa.binary()),
            ("encoded", pa.binary()),
            ("tally", pa.binary()),
        ]
    )


def _derive_group(batch: Any, job: _Job, images: str | None = None) -> Iterator[Any]:
    """``_derive_facts`` of one group of call records (the session shuffle's)."""
    facts = sorted((_calls.decode(b) for b in batch["body"].to_pylist()), key=session_order_key)
    yield from _derive_facts(facts, batch["order"][0].as_py(), job, images)


def _derive_part(batch: Any, job: _Job, images: str | None = None) -> Iterator[Any]:
    """``_derive_facts`` of every group of one part of a store (``FactStore.session_parts``:
    whole sessions, or calls without one, each its own group), read here in session order: no
    shuffle."""
    (item,) = batch.to_pylist()
    filters = dataclasses.replace(pickle.loads(item["filters"]), part=pickle.loads(item["part"]))
    with open_store(item["store"]) as store:
        kept: dict[str, bytes | None] = {}  # the digests the store kept, until their group's turn

        def facts() -> Iterator[InferenceCall]:
            for f, sha256 in store.iter_digested(filters):
                kept[f.inference_call_id] = sha256
                yield f

        for _, group in iter_sessions(facts()):
            digests = [kept.pop(f.inference_call_id, None) for f in group]
            yield from _derive_facts(group, _group_of(group[0])[1], job, images, digests)


def _derive_facts(
    facts: list[InferenceCall],
    order: str,
    job: _Job,
    images: str | None = None,
    digests: list[bytes | None] | None = None,
) -> Iterator[Any]:
    """The rows of one group (a session's facts in session order, or one call without a
    session; ``order``: its place in the local export's), flagged as the local export flags
    them, in batches; then one tally record: the derivation's counts, the builder's, the
    flags', the feedback targets met, the facts read, and the facts of the calls its DPO
    candidates name (the pairs are flagged on the driver). TRL vision rows' images are written
    into the folder ``images`` (the rows carry their names only). ``digests``: each fact's
    digest its store kept, or ``None`` (none: all computed here)."""
    # The group's lines of facts.sha256, in the local export's order (this group's place, then
    # each call's): shards carry them beside the rows, and the driver joins them in order.
    counts = FactCounts()
    for f in facts:
        counts.note(f)
    kept = digests or [None] * len(facts)
    yield _lines(order, [call_line(f, d) for f, d in zip(facts, kept, strict=True)])
    options = job.options
    builder = make_builder(options)
    flagger = Flagger(options.kind, dropped_flags(options.drop_flags, options.keep_flags))
    index = _index(job)
    index.take_met()  # what a failed attempt in this process may have left
    stats = DeriveStats()
    rows: list[Row] = []
    seq = 0
    sizes: list[tuple[int, int]] = []  # (first seq, bytes) of each batch handed back
    try:
        budget = _budget(job, builder)
    except TokenizerError as e:  # the driver reports it (a usage error)
        yield _record("tokenizer", order, str(e).encode())
        return
    try:
        derived = derive_rows(flagger.watch(facts), index, builder, stats)
        written: set[str] = set()  # image files this group wrote (rows repeat their context)
        for row in counted(flagger.apply(derived), budget):
            if images is not None and row.media:
                put_images(Path(images), row.media, written)
            rows.append(row)
            if len(rows) == _BATCH:
                sizes.append((seq, sum(len(r.encoded) for r in rows)))
                yield _table(order, seq, rows)
                seq += len(rows)
                rows = []
    except RowInvalid as e:
        # Its arguments do not survive Ray's pickling of exceptions: the driver raises it again.
        invalid = pickle.dumps((e.schema_id, e.source_ids, e.errors))
        yield _record("invalid", order, invalid)
        return
    if rows:
        sizes.append((seq, sum(len(r.encoded) for r in rows)))
        yield _table(order, seq, rows)
    tally = builder.tally()
    named = {c.call_id for c in (*tally.best.values(), *tally.worst.values())}
    candidates = [encode(f) for f in facts if f.inference_call_id in named]
    flags = flagger.tally()
    met = index.take_met()
    peak = (os.getpid(), _private_rss())  # with the session's facts still held
    tokens = None if budget is None else budget.tally()
    done = pickle.dumps(
        (stats, tally, flags, met, len(facts), candidates, sizes, peak, counts, tokens)
    )
    yield _record("tally", order, done)


def _lines(order: str, lines: list[bytes]) -> Any:
    """The ``facts.sha256`` lines of a group's calls, as records ordered after its rows'."""
    import pyarrow as pa

    n = len(lines)
    return pa.Table.from_arrays(
        [
            pa.array([_FACT] * n, pa.string()),
            pa.array([order] * n, pa.string()),
            pa.array(range(n), pa.int64()),
            pa.array([""] * n, pa.string()),
            pa.array([b""] * n, pa.binary()),
            pa.array(lines, pa.binary()),
            pa.array([b""] * n, pa.binary()),
        ],
        schema=_rows_schema(),
    )


def _record(kind: str, order: str, tally: bytes) -> Any:
    """A record of one group that is not a row (its ``tally``, or the row that failed)."""
    import pyarrow as pa

    record = {"kind": kind, "order": order, "seq": 0, "split": "", "prompt": b"", "encoded": b""}
    return pa.Table.from_pylist([{**record, "tally": tally}], schema=_rows_schema())


def _private_rss() -> int:
    """This process's private resident memory now (RssAnon), in bytes; 0 where /proc has none.
    Not VmHWM: a Ray worker maps the object store's shared memory, whose pages it reads count in
    its RSS though they are the node's, not the worker's."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _table(order: str, seq: int, rows: list[Row]) -> Any:
    import pyarrow as pa

    n = len(rows)
    return pa.Table.from_arrays(
        [
            pa.array([_ROW] * n, pa.string()),
            pa.array([order] * n, pa.string()),
            pa.array(range(seq, seq + n), pa.int64()),
            pa.array([r.split for r in rows], pa.string()),
            pa.array([r.prompt for r in rows], pa.binary()),
            pa.array([r.encoded for r in rows], pa.binary()),
            pa.array([b""] * n, pa.binary()),
        ],
        schema=_rows_schema(),
    )


# -- shards ----------------------------------------------------------------------------------
def _cuts(sizes: list[tuple[tuple[str, int], int]], target: int) -> list[tuple[str, int]]:
    """Shard boundaries: the (order, seq) where each shard after the first starts, so that
    shards hold about ``target`` bytes of rows; a long session's rows span several. They depend
    on the rows alone, so a rerun makes the same shards whatever Ray's partitions."""
    cuts: list[tuple[str, int]] = []
    held = 0
    for start, size in sorted(sizes):
        if held >= target:
            cuts.append(start)
            held = 0
        held += size
    return cuts


def _with_shard(batch: Any, cuts: list[tuple[str, int]]) -> Any:
    import pyarrow as pa

    keys = zip(batch["order"].to_pylist(), batch["seq"].to_pylist(), strict=True)
    shards = [bisect.bisect_right(cuts, key) for key in keys]
    return batch.append_column("shard", pa.array(shards, pa.int64()))


def _write_shard(batch: Any, folder: str) -> Any:
    """One shard: its rows in export order (``order``, ``seq``) as ``part-N.train.jsonl``,
    ``part-N.eval.jsonl``, ``part-N.prompts`` (each row's prompt digest, train rows then eval
    rows) and ``part-N.facts`` (its calls' lines of ``facts.sha256``), written whole or not at
    all, so a task Ray runs again writes the same files."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ordered = batch.sort_by([("order", "ascending"), ("seq", "ascending")])
    is_row = pc.equal(ordered["kind"], _ROW)
    kept = ordered.filter(is_row)
    rows = zip(
        kept["split"].to_pylist(), kept["prompt"].to_pylist(), kept["encoded"].to_pylist(),
        strict=True,
    )  # fmt: skip
    facts = ordered.filter(pc.invert(is_row))["encoded"].to_pylist()
    shard = _shard_files(rows, Path(folder), batch["shard"][0].as_py(), facts)
    return pa.Table.from_pylist([shard])


def _shard_files(
    rows: Iterable[tuple[str, bytes, bytes]], folder: Path, n: int, facts: Sequence[bytes] = ()
) -> dict[str, Any]:
    lines: dict[str, list[bytes]] = {"train": [], "eval": []}
    prompts: dict[str, list[bytes]] = {"train": [], "eval": []}
    for split, prompt, encoded in rows:
        lines[split] += (encoded, b"\n")
        prompts[split].append(prompt)
    parts = {
        "train.jsonl": b"".join(lines["train"]),
        "eval.jsonl": b"".join(lines["eval"]),
        "prompts": b"".join(prompts["train"] + prompts["eval"]),
        "facts": b"".join(facts),  # the calls' lines of facts.sha256, in export order
    }
    for suffix, data in parts.items():
        target = folder / f"part-{n:05d}.{suffix}"
        tmp = folder / f".{target.name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return {
        "shard": n,
        "train": len(prompts["train"]),
        "eval": len(prompts["eval"]),
        "calls": len(facts),
    }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _publish_shards(staging: Path, final: Path, shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Hash the shards and write the manifest last; the staging folder replaces ``final``
    only then, so a shard folder with a manifest is whole."""
    files = []
    ordered = sorted(shards, key=lambda s: s["shard"])
    for s in ordered:
        for suffix in ("train.jsonl", "eval.jsonl"):
            path = staging / f"part-{s['shard']:05d}.{suffix}"
            rows = s[suffix.split(".")[0]]
            files.append({"file": path.name, "rows": rows, "sha256": _sha256(path)})
        path = staging / f"part-{s['shard']:05d}.facts"
        files.append({"file": path.name, "calls": s["calls"], "sha256": _sha256(path)})
    manifest = {
        "format": "lithify-shards/1",
        "shards": [s["shard"] for s in ordered],
        "rows": {split: sum(s[split] for s in ordered) for split in ("train", "eval")},
        "files": files,
    }
    tmp = staging / f".{MANIFEST}.tmp"
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, staging / MANIFEST)
    _fsync_tree(staging)
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    return manifest


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_dir():  # the image files of TRL vision rows
            _fsync_tree(path)
            continue
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())


def _merged(folder: Path, manifest: dict[str, Any], parse: bool) -> Iterator[Row]:
    """The rows of the shards in their order, as ``SplitWriter`` takes them (``parse``: with
    their data, which Parquet needs)."""
    for n in manifest["shards"]:
        stem = f"part-{n:05d}"
        prompts = (folder / f"{stem}.prompts").read_bytes()
        at = 0
        for split in ("train", "eval"):
            with open(folder / f"{stem}.{split}.jsonl", "rb") as fh:
                for line in fh:
                    encoded = line[:-1]
                    data = orjson.loads(encoded) if parse else {}
                    yield Row(data, encoded, split, prompts[at : at + 16], [])
                    at += 16


# -- the export -------------------------------------------------------------------------------
def _contested(calls: Any, partitions: int | None) -> Any:
    """An expression true of the call records that share an id with another (the identity
    rule ranks only those); None when no record does."""
    from ray.data.expressions import col

    counted = calls.select_columns(["icid", "mcid"]).map_batches(_id_keys, batch_format="numpy")
    grouped = counted.groupby("id", num_partitions=partitions).count()
    shared = [r["id"] for r in grouped.filter(expr=col("count()") > 1).iter_rows()]
    if not shared:
        return None
    by_id = [k[1:] for k in shared if k[0] == "i"]
    by_response = [k[1:] for k in shared if k[0] == "m"]
    return col("icid").is_in(by_id) | col("mcid").is_in(by_response)


# (calls, feedback, aliases, the source's counts: the captures it left out, partitions)
_Calls = tuple[Any, list[Feedback], dict[str, str], DeriveStats, int]


def _store_parts(url: str, filters: FactFilter, partitions: int | None) -> _Calls:
    """A store's selection as its parts of whole sessions (``FactStore.session_parts``), one
    task each, that read and derive them where they are (the store applies the identity rule
    and the filter); its feedback, aliases and left-out captures, and the partitions of the
    shards' shuffle (when None, one per part)."""
    import ray

    session = dataclasses.replace(filters, order="session")
    with open_store(url) as store:
        feedback = list(store.iter_feedback())
        aliases = store.call_aliases(f.target_id for f in feedback if f.target_kind == "call")
        left_out = DeriveStats(
            duplicates=store.count_dropped(filters),
            richer_dropped=store.count_richer_dropped(filters),
        )
        parts = store.session_parts(session, _PART_CALLS)
    wanted = pickle.dumps(session)
    items = [{"store": url, "part": pickle.dumps(p), "filters": wanted} for p in parts]
    if partitions is None:
        partitions = len(parts)
    calls = ray.data.from_items(items, override_num_blocks=len(items))
    return calls, feedback, aliases, left_out, partitions


def _file_calls(paths: Sequence[Path], filters: FactFilter, partitions: int | None) -> _Calls:
    """The selected calls of fact files as records: every file read in a task, then the
    identity rule (captures sharing an id, rare, are ranked together on the driver) and the
    filter; the feedback, the aliases, the captures the rule left out that the filter matches,
    and the partitions of the session shuffle."""
    import ray
    from ray.data.expressions import col

    items = [{"path": str(p), "index": i} for i, p in enumerate(paths)]
    raw = (
        ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        .flat_map(_read_file)
        .materialize()
    )
    errors = raw.filter(expr=col("kind") == _ERROR).take_all()
    if errors:
        first = min(errors, key=lambda r: r["file"])
        raise InputError(bytes(first["body"]).decode())
    feedback = [
        _feedback.decode(r["body"]) for r in raw.filter(expr=col("kind") == _FEEDBACK).iter_rows()
    ]
    calls = raw.filter(expr=col("kind") == _CALL)
    if partitions is None:
        partitions = max(1, -(-raw.size_bytes() // _PARTITION_BYTES))
    contested = _contested(calls, partitions)
    kept: list[InferenceCall] = []
    per_call: dict[str, list[int]] = {}
    aliases: dict[str, str] = {}
    selected = calls
    if contested is not None:
        records = calls.filter(expr=contested).iter_rows()
        kept, _, aliases = resolve_facts(
            (_calls.decode(r["body"]) for r in records), left_out=per_call
        )
        selected = calls.filter(expr=~contested)
        if kept:
            selected = selected.union(ray.data.from_items([_call_record(f) for f in kept]))
    wanted = matcher(filters)
    if filters != FactFilter():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Ray prefers expressions; this one is Python
            selected = selected.filter(lambda r: wanted(_calls.decode(r["body"])))
    # Only the contested calls have captures left out.
    duplicates, richer = left_out_of(kept, per_call, filters)
    left_out = DeriveStats(duplicates=duplicates, richer_dropped=richer)
    return selected, feedback, aliases, left_out, partitions


def export_ray(
    paths: Sequence[Path],
    out_dir: str | Path,
    options: ExportOptions,
    filters: FactFilter | None = None,
    *,
    partitions: int | None = None,
    shard_bytes: int = 64 << 20,
    merge: bool = True,
    progress: Callable[[int], None] | None = None,
    provenance: Provenance | None = None,
    store: str | None = None,
) -> ShardedExport:
    """``export.pipeline.export`` of ``from_files(paths, filters)`` (or, with ``store`` a store
    URL and no paths, of ``from_store``: read in parallel by parts of whole sessions, one task
    each reading and deriving its part, ``FactStore.session_parts``) on the Ray this process is
    connected to (``cli.engine.ray_session``): same rows, same files, same summary; the rows are also left
    as sorted shards in ``OUT/shards`` with their manifest. ``partitions``: how many the
    session shuffle makes (when None, one per 32 MiB of facts); ``shard_bytes``: about how much of
    the rows' JSON a shard holds; ``merge=False`` writes the shards only
    (and the DPO pairs, as the last shard); ``progress`` is told of facts derived. A merged
    export is published as the local one is (``facts.sha256``, the card, ``manifest.json`` last,
    ``provenance`` in it), byte for byte the local export's.

    TRL vision rows (``--images``): the tasks write the images their rows show into
    ``OUT/shards/images`` (every node writes into the output folder, a shared filesystem; a
    file is named by its bytes' SHA-256, so writing it twice writes the same file), and the
    merge takes the files its rows name from there, as the local writer takes them from rows.

    Raises ``InputError`` for a fact file that cannot be read, ``RowInvalid`` for a row that
    fails its schema (nothing is written then)."""
    from ray.data.expressions import col

    filters = filters or FactFilter()
    if filters.limit is not None:
        raise ValueError("a distributed export reads every selected fact: no limit")
    builder = make_builder(options)
    # The tokenizer, loaded before anything is read: each task counts its sessions' rows with
    # its node's copy, whose SHA-256 must be this one's (TokenBudget.merge).
    budget = token_budget(options, builder)
    out = Path(out_dir)
    # ``stats`` starts with the captures the source left out; the tasks' counts add up in it.
    if store is not None:
        if paths:
            raise ValueError("a distributed export reads fact files or a store, not both")
        selected, feedback, aliases, stats, partitions = _store_parts(store, filters, partitions)
    else:
        selected, feedback, aliases, stats, partitions = _file_calls(paths, filters, partitions)

    # Held from the staging folder to the manifest: another export into the folder (whose
    # staging this one would remove) fails at once.
    with hold_folder(out):
        job = _Job(options, feedback, aliases)
        # The shards' folder, made before the tasks run: they write the image files into it.
        staging = out / f".{SHARDS}.staging"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        images = None
        if options.images:
            images = staging / IMAGES_DIR
            images.mkdir()
        kwargs = {"job": job, "images": None if images is None else str(images)}
        try:
            if store is not None:  # parts of whole sessions, each read and derived in one task
                derived = selected.map_batches(
                    _derive_part, batch_size=1, fn_kwargs=kwargs, batch_format="pyarrow"
                ).materialize()
            else:
                derived = (
                    selected.groupby("group", num_partitions=partitions)
                    .map_groups(_derive_group, fn_kwargs=kwargs, batch_format="pyarrow")
                    .materialize()
                )
            for r in derived.filter(expr=col("kind") == "tokenizer").take(1):
                raise TokenizerError(bytes(r["tally"]).decode())
            for r in derived.filter(expr=col("kind") == "invalid").take(1):
                raise RowInvalid(*pickle.loads(r["tally"]))
        except BaseException:  # nothing is written: not the images the tasks wrote either
            shutil.rmtree(staging, ignore_errors=True)
            raise
        index = FeedbackIndex(feedback, aliases)
        flagger = Flagger(options.kind, dropped_flags(options.drop_flags, options.keep_flags))
        candidates: list[InferenceCall] = []
        sizes: list[tuple[tuple[str, int], int]] = []
        peaks: dict[int, int] = {}
        digests = FactDigests()
        for r in derived.filter(expr=col("kind") == "tally").iter_rows():
            part, tally, flags, met, n, named, batches, (pid, rss), counts, tokens = pickle.loads(
                r["tally"]
            )
            if budget is not None:
                budget.merge(tokens)
            digests.merge(counts)
            peaks[pid] = max(peaks.get(pid, 0), rss)
            sizes += (((r["order"], seq), size) for seq, size in batches)
            stats.add(part)
            builder.merge(tally)
            flagger.merge(flags)
            index.meet(met)
            candidates += (_calls.decode(b) for b in named)
            if progress is not None:
                progress(n)
        for _ in flagger.watch(candidates):
            pass

        rows = derived.filter(expr=col("kind").is_in([_ROW, _FACT]))
        cuts = _cuts(sizes, shard_bytes)
        shards = (
            rows.map_batches(_with_shard, fn_kwargs={"cuts": cuts}, batch_format="pyarrow")
            .groupby("shard", num_partitions=partitions)
            .map_groups(_write_shard, fn_kwargs={"folder": str(staging)}, batch_format="pyarrow")
            .take_all()
        )
        pairs = [
            (r.split, r.prompt, r.encoded) for r in counted(flagger.apply(builder.pairs()), budget)
        ]
        if pairs:  # after every session's rows, as the local export writes them
            shards.append(_shard_files(pairs, staging, len(cuts) + 1))
        manifest = _publish_shards(staging, out / SHARDS, shards)

        writer = SplitWriter(
            out,
            options.fmt,
            columns_for(options.kind, builder.shape, images=options.images),
            before_commit=lambda: unpublish(out),
            images_from=out / SHARDS / IMAGES_DIR,
        )
        if merge:
            with writer:
                # Parquet rows are rebuilt from their data, and vision rows name their images there.
                parse = options.fmt != "jsonl" or options.images
                for row in _merged(out / SHARDS, manifest, parse):
                    writer.write(row)
        summary = note_flags(summarize(options, builder, stats, writer, index.dropped()), flagger)
        if budget is not None:
            summary = note_tokens(summary, budget, writer.left_out)
        if merge:
            for n in manifest["shards"]:
                with open(out / SHARDS / f"part-{n:05d}.facts", "rb") as fh:
                    for line in fh:
                        digests.add(line)
            origin = provenance if provenance is not None else Provenance()
            publish(
                out,
                summary=summary,
                options=options,
                digests=digests,
                feedback=feedback,
                origin=origin,
            )
        return ShardedExport(summary, out / SHARDS, manifest, peaks)
