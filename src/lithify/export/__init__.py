"""Export: facts → segments → rows → profile → validated files (docs/export.md).

One pipeline, as a library; `lithify export`, `lithify demo` and any other caller run it so:

    selection = from_store(store, FactFilter(session_id="conv-42"))  # or from_files, from_facts
    summary = export(selection, "out/sft", ExportOptions(kind="sft", profile="trl"))

``source`` selects the facts (one filter, the same on a store and on fact files), ``pipeline``
derives segments with their feedback (``lithify.derive``), builds and validates rows
(``rows``, ``profiles``, ``trainer``, ``validate``, ``where``) and writes them (``writers``);
``summary`` is what it returns.
"""

from __future__ import annotations

from lithify.derive.feedback import FEEDBACK_DROP_REASONS
from lithify.export.manifest import Manifest, Provenance, cli_provenance
from lithify.export.pipeline import ExportOptions, WorkerDied, export, make_builder
from lithify.export.profiles import KINDS, PROFILE_CHANGES, PROFILES, ProfileError
from lithify.export.rows import EXPORTER
from lithify.export.source import (
    Selection,
    from_facts,
    from_files,
    from_store,
    plain,
    select,
)
from lithify.export.summary import ExportSummary
from lithify.export.trainer import SKIP_REASONS
from lithify.export.validate import RowInvalid
from lithify.export.where import WhereError
from lithify.export.writers import FORMATS, FolderBusy

__all__ = [
    "EXPORTER",
    "FEEDBACK_DROP_REASONS",
    "FORMATS",
    "KINDS",
    "PROFILES",
    "PROFILE_CHANGES",
    "SKIP_REASONS",
    "ExportOptions",
    "ExportSummary",
    "FolderBusy",
    "Manifest",
    "ProfileError",
    "Provenance",
    "RowInvalid",
    "Selection",
    "WhereError",
    "WorkerDied",
    "cli_provenance",
    "export",
    "from_facts",
    "from_files",
    "from_store",
    "make_builder",
    "plain",
    "select",
]
