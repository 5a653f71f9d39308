"""``lithify export --replay OUT_DIR/manifest.json``: make an export again from its manifest and
check it byte for byte (docs/export.md, Replay).

The export runs again with the manifest's options, filters and input, into a temporary folder
beside the original, with the manifest's provenance (so its own manifest and card are made the
same way). Every file is then compared three ways: the SHA-256 the manifest records, the file in
the folder now, the file the replay made. When they differ, the two ``facts.sha256`` say which
facts and feedback changed: added to the input since (a store keeps growing: new facts the
filters select were not in the fact hash), removed, or with other content.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson

from lithify.export.manifest import DIGESTS, MANIFEST, Manifest, decode_manifest
from lithify.export.media import IMAGES_DIR
from lithify.export.pipeline import ExportOptions, export
from lithify.export.rows import EXPORTER
from lithify.export.source import Selection
from lithify.export.tokens import TokenizerError
from lithify.store import FactFilter


class ReplayError(Exception):
    """A manifest that cannot be replayed: unreadable, or its facts were given in memory."""


class FileCheck(msgspec.Struct, omit_defaults=True):
    name: str
    recorded: str | None  # the SHA-256 the manifest holds (None for the manifest itself)
    present: str | None  # of the file in the folder now; None: missing
    replayed: str | None  # of the file the replay wrote; None: not written
    same: bool


class Changes(msgspec.Struct):
    """Ids of facts (``call:…``) and feedback (``feedback:…``) that differ, as JSON strings."""

    added: list[str]
    removed: list[str]
    changed: list[str]


class ReplayResult(msgspec.Struct, kw_only=True):
    manifest: str
    identical: bool  # every file the same, three ways
    recorded_with: str  # the lithify of the manifest
    replayed_with: str
    files: list[FileCheck]
    facts: Changes  # between the recorded facts.sha256 and the replay's


def load(path: Path) -> Manifest:
    try:
        return decode_manifest(Path(path).read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ReplayError(f"{path}: not a readable export manifest: {e}") from None


def options_of(manifest: Manifest) -> ExportOptions:
    """The ``ExportOptions`` a manifest records (lists back to tuples)."""
    raw = {k: tuple(v) if isinstance(v, list) else v for k, v in manifest.options.items()}
    try:
        return ExportOptions(**raw)
    except TypeError as e:  # a manifest of another lithify, with options this one lacks
        raise ReplayError(f"options this lithify does not have: {e}") from None


def filters_of(manifest: Manifest) -> FactFilter:
    raw = manifest.provenance.filters or {}
    return FactFilter(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


def _sha(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except FileNotFoundError:
        return None


def _digests(path: Path) -> dict[str, str]:
    """``facts.sha256`` as name → digest (a missing file: none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    return {line[66:].decode(): line[:64].decode() for line in data.splitlines() if line}


def changes(recorded: dict[str, str], replayed: dict[str, str]) -> Changes:
    return Changes(
        added=sorted(replayed.keys() - recorded.keys()),
        removed=sorted(recorded.keys() - replayed.keys()),
        changed=sorted(k for k in recorded.keys() & replayed.keys() if recorded[k] != replayed[k]),
    )


def _outputs(folder: Path) -> list[str]:
    """The files an export wrote into ``folder``: its own, and the image files of TRL vision
    rows (``images/NAME``)."""
    names = [p.name for p in folder.iterdir() if p.is_file()]
    images = folder / IMAGES_DIR
    if images.is_dir():
        names += [f"{IMAGES_DIR}/{p.name}" for p in images.iterdir()]
    return sorted(names)


def replay(manifest_path: Path, select: Callable[[Manifest], Selection]) -> ReplayResult:
    """Replay the export ``manifest_path`` describes; ``select`` gives its facts (the caller
    opens the store or reads the fact files the manifest names)."""
    manifest_path = Path(manifest_path)
    folder = manifest_path.parent
    manifest = load(manifest_path)
    p = manifest.provenance
    if p.store is None and not p.facts:
        raise ReplayError("the export's facts were given in memory: nothing to read them from")
    options = options_of(manifest)
    scratch = Path(tempfile.mkdtemp(prefix=".replay-", dir=folder.parent))
    try:
        try:
            export(select(manifest), scratch, options, provenance=p)
        except TokenizerError as e:  # its --tokenizer is no longer here (or lacks the extra)
            raise ReplayError(str(e)) from None
        checks = []
        for name in [*manifest.files, MANIFEST]:
            recorded = manifest.files[name].sha256 if name in manifest.files else None
            present, replayed = _sha(folder / name), _sha(scratch / name)
            want = recorded if recorded is not None else present
            same = present is not None and present == replayed == want
            checks.append(FileCheck(name, recorded, present, replayed, same))
        for extra in _outputs(scratch):
            if extra not in manifest.files and extra != MANIFEST:
                checks.append(
                    FileCheck(extra, None, _sha(folder / extra), _sha(scratch / extra), False)
                )
        facts = changes(_digests(folder / DIGESTS), _digests(scratch / DIGESTS))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ReplayResult(
        manifest=str(manifest_path),
        identical=all(c.same for c in checks),
        recorded_with=manifest.lithify,
        replayed_with=EXPORTER,
        files=checks,
        facts=facts,
    )


def describe(result: ReplayResult) -> list[str]:
    """What differs, a line each, for people (empty when the replay is identical)."""
    lines = []
    if result.recorded_with != result.replayed_with:
        lines.append(f"recorded with {result.recorded_with}, replayed with {result.replayed_with}")
    for c in result.files:
        if c.same:
            continue
        if c.present is None:
            lines.append(f"{c.name}: missing from the folder")
        elif c.recorded is not None and c.present != c.recorded:
            lines.append(f"{c.name}: changed since the export (not the bytes the manifest records)")
        if c.replayed is None:
            lines.append(f"{c.name}: the replay did not write it")
        elif c.replayed != (c.recorded or c.present):
            lines.append(f"{c.name}: the replay made other bytes")
    for label, ids in (
        ("added since", result.facts.added),
        ("removed since", result.facts.removed),
        ("changed since", result.facts.changed),
    ):
        for ident in ids:
            kind, _, name = ident.partition(":")
            lines.append(f"{kind} {orjson.loads(name)} {label}")
    return lines
