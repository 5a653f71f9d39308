"""What an export did, as one typed value: the CLI prints it as a table or encodes it once for
``--json``; any other caller reads its fields."""

from __future__ import annotations

import msgspec

from lithify.derive.sessions import DeriveStats
from lithify.export.rows import EXPORTER
from lithify.export.tokens import TokenStats


class ExportSummary(msgspec.Struct, kw_only=True):
    """One export: where rows went, how many per split, and every row not written, by reason.
    Fields are in the order ``--json`` prints them; count maps are sorted by reason."""

    kind: str
    profile: str
    shape: str
    fmt: str = msgspec.field(name="format")
    schema: str  # the row schema id, as rows carry it in metadata.schema
    exporter: str = EXPORTER
    output: str
    files: dict[str, str]  # split → file
    facts_read: int  # the facts selected, other captures of their calls included
    derive: DeriveStats
    rows: dict[str, int]  # split → rows written
    skipped: dict[str, int]  # SKIP_REASONS → rows
    filtered: int  # rows --where left out
    changes: dict[str, int]  # PROFILE_CHANGES → rows
    flags: dict[str, int] = msgspec.field(default_factory=dict)  # FLAGS → rows built with it
    feedback_dropped: dict[str, int]  # FEEDBACK_DROP_REASONS → feedback facts
    # --tokenizer: the token counts of the rows written (absent, not null, without it)
    tokens: TokenStats | msgspec.UnsetType = msgspec.UNSET
