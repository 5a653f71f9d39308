"""``manifest.json``: what an export is, proven (docs/export.md, Manifest and dataset card).

Beside the rows an export writes ``facts.sha256`` (one line per fact and feedback read: its
SHA-256 and its id, sorted), ``README.md`` (the dataset card, ``export.card``) and, last,
``manifest.json``: the options and input, content hashes of the facts and feedback read, every
count of the summary, and the size and SHA-256 of each other file. Every file is written to a
temporary name and renamed; the manifest is removed before new rows replace old ones and
written after everything else, so a folder holds a manifest only when its files are complete,
and the manifest's hashes say whether they are still the files it describes.

Nothing in these files depends on the clock, the output folder or the order facts were read in:
the same facts and options give the same bytes (``lithify export --replay`` relies on it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec
import orjson

from lithify.core import factfile
from lithify.derive.sessions import DeriveStats
from lithify.export.media import DEFAULT_MAX_INLINE, IMAGES_DIR
from lithify.export.rows import EXPORTER
from lithify.export.tokens import TokenStats
from lithify.export.writers import Background
from lithify.model import Feedback, InferenceCall
from lithify.store import FactFilter, display_url

MANIFEST = "manifest.json"
CARD = "README.md"
DIGESTS = "facts.sha256"
MANIFEST_FORMAT = "lithify-export-manifest/1"
_DEPTH = 4  # batches of encoded facts that may wait for the hashing thread…
_BATCH = 1 << 20  # …of about this many bytes each: one hand-over per batch, not per fact
_KEPT = 128  # what a kept digest counts towards a batch: about its line
_SPOOL = 4 << 20  # bytes of fact lines kept in memory before they spill to a temporary file


class Provenance(msgspec.Struct, kw_only=True):
    """Where an export's facts came from and how it was asked for; ``None``: not known (a
    library caller that passed facts in memory gives none, and such an export cannot replay)."""

    command: list[str] | None = None  # the command line as given, passwords masked
    store: str | None = None  # the store URL, password masked
    facts: list[str] | None = None  # fact files, absolute paths
    filters: dict[str, Any] | None = None  # the FactFilter fields that were set


# Filter field → the `lithify export` option that sets it.
_FILTER_OPTIONS = {
    "session_id": "--session",
    "model": "--model",
    "source": "--source",
    "since": "--since",
    "until": "--until",
}


def cli_provenance(
    options: Any,
    *,
    store: str | None = None,
    facts: Iterable[Path] | None = None,
    filters: FactFilter | None = None,
) -> Provenance:
    """The ``Provenance`` of a `lithify export` run: the command that makes the same export
    (options that differ from their default, whether given as flags or environment variables;
    without ``-o``, so a moved folder's manifest stays true), passwords masked, fact files as
    absolute paths, the filters that were set."""
    fields: dict[str, Any] = {}
    if filters is not None:
        fields = {k: v for k, v in asdict(filters).items() if v is not None and k != "order"}
    paths = None if facts is None else [str(Path(p).absolute()) for p in facts]
    masked = None if store is None else display_url(store)
    cmd = ["lithify", "export", options.kind]
    for flag, value, default in (
        ("--profile", options.profile, "canonical"),
        ("--reasoning-key", options.reasoning_key, None),
        ("--arguments", options.arguments, None),
        ("--shape", options.shape, None),
        ("--format", options.fmt, "jsonl"),
        ("--reward", options.reward, "score"),
    ):
        if value != default:
            cmd += [flag, str(value)]
    if options.eval_fraction:
        cmd += ["--eval-fraction", repr(options.eval_fraction)]
    for w in options.where:
        cmd += ["--where", w]
    if options.keep_degraded:
        cmd.append("--keep-degraded")
    if options.images:
        cmd.append("--images")
    if options.max_inline_bytes != DEFAULT_MAX_INLINE:
        cmd += ["--max-inline-bytes", str(options.max_inline_bytes)]
    if options.tokenizer is not None:
        cmd += ["--tokenizer", options.tokenizer]
    if options.max_tokens is not None:
        cmd += ["--max-tokens", str(options.max_tokens)]
    if options.fit != "drop":
        cmd += ["--fit", options.fit]
    for flag in options.drop_flags:
        cmd += ["--drop-flag", flag]
    for flag in options.keep_flags:
        cmd += ["--keep-flag", flag]
    if masked is not None:
        cmd += ["--store", masked]
    for path in paths or ():
        cmd += ["--facts", path]
    for name, flag in _FILTER_OPTIONS.items():
        value = fields.get(name)
        for v in [value] if isinstance(value, str) else value or ():
            cmd += [flag, str(v)]
    return Provenance(command=cmd, store=masked, facts=paths, filters=fields)


class ContentHash(msgspec.Struct):
    sha256: str  # of the sorted lines of facts.sha256 for these items, each with its newline
    count: int


class FeedbackUsed(msgspec.Struct):
    sha256: str
    count: int  # feedback facts read
    joined: int  # of them, joined to a call or session of the export
    dropped: dict[str, int]  # FEEDBACK_DROP_REASONS → feedback facts


class OutputFile(msgspec.Struct, omit_defaults=True):
    sha256: str
    bytes: int
    rows: int | None = None  # row files only


class Manifest(msgspec.Struct, kw_only=True):
    """One export, as ``manifest.json`` holds it (fields in file order)."""

    manifest: str = MANIFEST_FORMAT
    lithify: str = EXPORTER
    provenance: Provenance
    options: dict[str, Any]  # ExportOptions, every field
    facts: ContentHash  # the facts read, one capture per call
    feedback: FeedbackUsed
    sources: dict[str, int]  # translator (source.name) → facts read
    models: dict[str, int]  # model → facts read ("" when a fact names none)
    degradations: dict[str, int]  # DEGRADATIONS → facts read carrying it
    kind: str
    profile: str
    shape: str
    fmt: str = msgspec.field(name="format")
    schema: str
    derive: DeriveStats
    rows: dict[str, int]
    skipped: dict[str, int]
    filtered: int
    changes: dict[str, int]
    flags: dict[str, int]  # FLAGS → rows built carrying it (written or left out)
    # --tokenizer: the tokenizer (and its SHA-256), the budget, the counts of the rows written
    tokens: TokenStats | msgspec.UnsetType = msgspec.UNSET
    files: dict[str, OutputFile]  # file name in the folder → its bytes' hash


def _line(kind: str, ident: str, sha256: bytes) -> bytes:
    # sha256sum's format, the name being the kind and the id as JSON (any character is safe:
    # an id with a lone surrogate, which orjson refuses, as an ASCII escape).
    try:
        name = orjson.dumps(ident)
    except TypeError:
        name = json.dumps(ident).encode()
    return b"%s  %s:%s\n" % (sha256.hex().encode(), kind.encode(), name)


def call_line(fact: InferenceCall, sha256: bytes | None = None) -> bytes:
    """A call's line of ``facts.sha256``: the SHA-256 of its JSON (``sha256``: the one its store
    kept, else computed) and its id."""
    return _line("call", fact.inference_call_id, sha256 or factfile.fact_sha256(fact))


def _name(line: bytes) -> bytes:
    """What a line of ``facts.sha256`` names (after the 64 hex digits and two spaces)."""
    return line[66:]


class FactCounts:
    """What a manifest counts of the facts an export reads: by source, model, degradation."""

    def __init__(self) -> None:
        self.sources: Counter[str] = Counter()
        self.models: Counter[str] = Counter()
        self.degradations: Counter[str] = Counter()

    def note(self, fact: InferenceCall) -> None:
        self.sources[fact.source.name] += 1
        self.models[fact.model or ""] += 1
        for name in fact.degradations:
            self.degradations[name] += 1

    def merge(self, other: FactCounts) -> None:
        """Add ``other``'s counts (a distributed export's, task by task)."""
        self.sources.update(other.sources)
        self.models.update(other.models)
        self.degradations.update(other.degradations)


class FactDigests(FactCounts):
    """The facts an export reads, digested as they pass (``watch``), with what the manifest
    counts of them. Their lines wait in a spooled temporary file: memory stays flat."""

    def __init__(self) -> None:
        super().__init__()
        self.spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL)  # noqa: SIM115
        self.hash = hashlib.sha256()
        self.count = 0

    def _digest(self, batch: list[tuple[str, bytes | None, bytes | None]]) -> None:
        for ident, data, sha256 in batch:
            if sha256 is None:
                sha256 = hashlib.sha256(data or b"").digest()
            self.add(_line("call", ident, sha256))

    def add(self, line: bytes) -> None:
        """One call's line (``call_line``), in the export's order."""
        self.spool.write(line)
        self.hash.update(line)
        self.count += 1

    def watch(self, facts: Iterable[tuple[InferenceCall, bytes | None]]) -> Iterator[InferenceCall]:
        """The facts of ``facts``, digested in the order given (session order: a function of
        the facts alone), each with the SHA-256 of its JSON its store kept (``None``: computed
        here). Hashing releases the GIL: it runs in a thread of its own, beside the export."""
        background = Background(self._digest, depth=_DEPTH)
        batch: list[tuple[str, bytes | None, bytes | None]] = []
        size = 0
        try:
            for f, sha256 in facts:
                data = factfile.fact_json(f) if sha256 is None else None
                batch.append((f.inference_call_id, data, sha256))
                size += _KEPT if data is None else len(data)
                if size >= _BATCH:
                    background.put(batch)
                    batch, size = [], 0
                self.note(f)
                yield f
            background.put(batch)
        except GeneratorExit:  # the export failed: nothing will be published
            background.abandon()
            raise
        background.close()

    def chunks(self) -> Iterator[bytes]:
        self.spool.seek(0)
        while chunk := self.spool.read(1 << 20):
            yield chunk


def _hash(lines: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line)
    return h.hexdigest()


def file_entry(path: Path, rows: int | None = None) -> OutputFile:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return OutputFile(h.hexdigest(), size, rows)


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """``data`` (or its chunks) into ``path`` through a temporary file in its folder, fsynced
    and renamed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in [data] if isinstance(data, bytes) else data:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unpublish(folder: Path) -> None:
    """Remove the manifest of an earlier export before its rows are replaced: from then until
    the new manifest lands, the folder says it is incomplete."""
    (Path(folder) / MANIFEST).unlink(missing_ok=True)


def encode_manifest(manifest: Manifest) -> bytes:
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


def decode_manifest(data: bytes) -> Manifest:
    return msgspec.json.decode(data, type=Manifest)


def publish(
    folder: Path,
    *,
    summary: Any,
    options: Any,
    digests: FactDigests,
    feedback: Sequence[Feedback],
    origin: Provenance,
    hashed: Mapping[str, tuple[str, int]] | None = None,
) -> Manifest:
    """Write ``facts.sha256``, the card and, last, ``manifest.json`` for the rows just written
    (``summary``: their ``ExportSummary``; ``options``: the ``ExportOptions``; ``hashed``: the
    SHA-256 and size of row files hashed as they were written, by split, not read again)."""
    from lithify.export.card import render

    folder = Path(folder)
    # A feedback fact given twice (in two files) is one, as a store keeps it; in id order.
    notes = sorted(
        {_line("feedback", f.feedback_id, factfile.fact_sha256(f)) for f in feedback}, key=_name
    )
    write_atomic(folder / DIGESTS, chain(digests.chunks(), notes))
    digests.spool.close()
    files = {DIGESTS: file_entry(folder / DIGESTS)}
    for split, path in sorted(summary.files.items()):
        rows = summary.rows.get(split, 0)
        known = (hashed or {}).get(split)
        entry = file_entry(Path(path), rows) if known is None else OutputFile(*known, rows)
        files[Path(path).name] = entry
    images = folder / IMAGES_DIR
    if images.is_dir():
        # The image files TRL vision rows name (the writer left only those): outputs too.
        for path in sorted(images.iterdir()):
            files[f"{IMAGES_DIR}/{path.name}"] = file_entry(path)
    dropped = dict(summary.feedback_dropped)
    distinct = len({f.feedback_id for f in feedback})  # as derivation joins them: one per id
    manifest = Manifest(
        provenance=origin,
        options=msgspec.to_builtins(asdict(options)),
        facts=ContentHash(digests.hash.hexdigest(), digests.count),
        feedback=FeedbackUsed(_hash(notes), len(notes), distinct - sum(dropped.values()), dropped),
        sources=dict(sorted(digests.sources.items())),
        models=dict(sorted(digests.models.items())),
        degradations=dict(sorted(digests.degradations.items())),
        kind=summary.kind,
        profile=summary.profile,
        shape=summary.shape,
        fmt=summary.fmt,
        schema=summary.schema,
        derive=summary.derive,
        rows=dict(summary.rows),
        skipped=dict(summary.skipped),
        filtered=summary.filtered,
        changes=dict(summary.changes),
        flags=dict(summary.flags),
        tokens=summary.tokens,
        files=dict(sorted(files.items())),
    )
    card = render(manifest).encode()
    write_atomic(folder / CARD, card)
    manifest.files[CARD] = file_entry(folder / CARD)
    manifest.files = dict(sorted(manifest.files.items()))
    write_atomic(folder / MANIFEST, encode_manifest(manifest))
    return manifest
