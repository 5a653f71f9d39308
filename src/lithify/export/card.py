"""``README.md``: the dataset card of an export, in the Hugging Face format, made from its
manifest alone (docs/export.md, Manifest and dataset card).

The YAML header's ``configs`` name the split files, so ``datasets.load_dataset(OUT_DIR)`` loads
the train and eval splits with no other argument (and ignores the manifest and digests beside
them). The body says only what the manifest holds: counts, hashes, options and input.
"""

from __future__ import annotations

import shlex
import unicodedata
from typing import TYPE_CHECKING

import msgspec
import orjson

from lithify.derive import ALTERNATIVES, SPLIT_REASONS
from lithify.derive.feedback import FEEDBACK_DROP_REASONS
from lithify.export.flags import FLAGS, dropped_flags
from lithify.export.profiles import PROFILE_CHANGES
from lithify.export.tokens import PROCESSOR
from lithify.export.trainer import LOSSY_DEGRADATIONS, SKIP_REASONS
from lithify.export.writers import columns_for
from lithify.model import DEGRADATION_REASONS

if TYPE_CHECKING:
    from lithify.export.manifest import Manifest

SPLITS = ("train", "eval")
RICHER = (
    "captures the identity rule dropped that hold message parts (reasoning, a tool result) the "
    "capture their call is read from lacks: its rows lack them; the captures stay stored "
    "(docs/store.md, Reading)"
)


def _yaml(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar: any character is safe.
    return orjson.dumps(text).decode()


def _cell(value: object) -> str:
    """A Markdown table cell: backslashes and pipes escaped; control characters and line or
    paragraph separators, which would break the table's line, as ``\\uXXXX``."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text
    )


def _code(value: str) -> str:
    # A code span that holds any backticks the value has.
    longest = 0
    run = 0
    for ch in value:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{_cell(value)}{pad}{ticks}"


def _size_category(rows: int) -> str:
    """The Hub's ``size_categories`` bucket for ``rows``."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if rows < limit:
            return name
    for limit, name in ((1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if rows < limit:
            return name
    return "n>10M"


def data_files(manifest: Manifest) -> list[tuple[str, str]]:
    """(split, file) for the splits that hold rows; the train file when none does."""
    ext = manifest.fmt
    found = [(s, f"{s}.{ext}") for s in SPLITS if manifest.rows.get(s)]
    return found or [("train", f"train.{ext}")]


# A column's type in the header: JSON columns are ``datasets.Json`` (the value as the row holds
# it), so no chunk of a file and no split is typed from what another holds.
_JSONL_DTYPES = {"json": "dtype: json", "float": "dtype: float64", "images": "list: string"}
_PARQUET_DTYPES = {"json": "dtype: string", "float": "dtype: float64", "images": "list: image"}


def _header(manifest: Manifest) -> list[str]:
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split, path in data_files(manifest):
        lines += [f"  - split: {split}", f"    path: {_yaml(path)}"]
    images = bool(manifest.options.get("images"))
    if manifest.fmt == "jsonl" or images:
        # JSON lines: datasets would type each column from a file's first 10 MB and cast the
        # rest, and the eval split, to it; a tool call, argument or flag first seen later fails
        # the load. Parquet: the file's own metadata has the types, and the card says the
        # images are datasets.Image.
        dtypes = _JSONL_DTYPES if manifest.fmt == "jsonl" else _PARQUET_DTYPES
        lines += ["dataset_info:", "  features:"]
        for name, kind in columns_for(manifest.kind, manifest.shape, images=images):
            lines += [f"  - name: {name}", f"    {dtypes[kind]}"]
    total = sum(manifest.rows.values())
    lines += [
        "tags:",
        "- lithify",
        f"- {_yaml(manifest.kind)}",
        "size_categories:",
        f"- {_yaml(_size_category(total))}",
        "---",
    ]
    return lines


def _table(head: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return [*out, ""]


def _loading(m: Manifest, total: int) -> list[str]:
    """How to load the rows; an export without any says so, as ``datasets`` refuses empty
    files ("corresponds to no data") whatever the card declares."""
    if not total:
        return [
            "This export holds no rows (see *Rows left out or changed* below): there is "
            "nothing for `datasets.load_dataset` to load, and it refuses the empty files.",
            "",
        ]
    return [
        "```python",
        "import datasets",
        "",
        'ds = datasets.load_dataset("path/to/this/folder")  # '
        + ", ".join(s for s, _ in data_files(m)),
        *_image_lines(m),
        "```",
        "",
    ]


def render(manifest: Manifest) -> str:
    """The card's text (``manifest.files`` need not list the card itself)."""
    m = manifest
    total = sum(m.rows.values())
    lines = _header(m)
    lines += [
        "",
        f"# {m.kind} rows, {m.profile} profile",
        "",
        f"{total} rows made by {m.lithify} from {m.facts.count} facts "
        f"({m.derive.calls} calls in {m.derive.segments} segments of {m.derive.sessions} "
        f"sessions). Everything below is read from `manifest.json`, which holds the SHA-256 "
        f"of every file here; `lithify export --replay manifest.json` makes the export again "
        f"and checks it byte for byte.",
        "",
        *_loading(m, total),
        "## Splits",
        "",
    ]
    lines += _table(
        ("split", "file", "rows", "sha256"),
        [
            (s, f"{s}.{m.fmt}", m.rows.get(s, 0), m.files[f"{s}.{m.fmt}"].sha256)
            for s in SPLITS
            if f"{s}.{m.fmt}" in m.files
        ],
    )
    images = bool(m.options.get("images"))
    columns = columns_for(m.kind, m.shape, images=images)
    lines += [
        "## Row schema",
        "",
        f"Rows of kind `{m.kind}`, shape `{m.shape}`, profile `{m.profile}`, valid against the "
        f"JSON Schema `{m.schema}` (named in every row's `metadata.schema`). Columns: "
        + ", ".join(f"`{name}`" for name, _ in columns)
        + (
            "; in Parquet, nested values are JSON text."
            if m.fmt == "parquet"
            else "; one JSON object per line."
        )
        + _images_note(m, images),
        "",
        "## Sources",
        "",
        "Facts read, by the translator that made them:",
        "",
    ]
    lines += _table(("source", "facts"), [(_code(k), n) for k, n in m.sources.items()])
    lines += ["Facts read, by model:", ""]
    lines += _table(
        ("model", "facts"), [(_code(k) if k else "(none)", n) for k, n in m.models.items()]
    )
    lines += _flags(m)
    lines += _tokens(m)
    lines += _degradations(m)
    lines += _left_out(m)
    lines += _provenance(m)
    return "\n".join(lines).rstrip("\n") + "\n"


def _image_lines(m: Manifest) -> list[str]:
    """JSONL rows of TRL vision rows name image files relative to the folder, which ``datasets``
    would resolve against the working directory: the card says how to decode them."""
    if not m.options.get("images") or m.fmt != "jsonl":
        return []
    return [
        "# images: paths relative to this folder, decoded as datasets.Image",
        'folder = "path/to/this/folder"',
        'ds = ds.map(lambda r: {"images": [f"{folder}/{p}" for p in r["images"]]})',
        'ds = ds.cast_column("images", datasets.List(datasets.Image()))',
    ]


def _images_note(m: Manifest, images: bool) -> str:
    if not images:
        return ""
    n = sum(1 for name in m.files if name.startswith("images/"))
    if m.fmt == "parquet":
        return (
            " `images` holds each image's bytes and name, a list of `datasets.Image` "
            "(the file's schema and this card's `dataset_info` say so)."
        )
    return (
        f" `images` names the image files each row shows, in order, one per "
        f'`{{"type": "image"}}` entry of its messages: {n} files in `images/`, each named by '
        "the SHA-256 of its bytes."
    )


def _flags(m: Manifest) -> list[str]:
    lines = ["## Quality flags", ""]
    if not m.flags:
        return [*lines, "No row carries a quality flag.", ""]
    drop = dropped_flags(m.options.get("drop_flags", ()), m.options.get("keep_flags", ()))
    lines += [
        "Rows built carrying each flag (a row may carry several); rows carrying a dropped flag "
        "are not in the files (`skipped: flagged` below), the others carry theirs in "
        "`metadata.flags`.",
        "",
    ]
    rows = [
        (f"`{k}`", n, "dropped" if k in drop else "kept", FLAGS.get(k, ""))
        for k, n in m.flags.items()
    ]
    return lines + _table(("flag", "rows", "rows are", "meaning"), rows)


def _tokens(m: Manifest) -> list[str]:
    t = m.tokens
    if isinstance(t, msgspec.UnsetType):
        return []
    lines = [
        "## Token budget",
        "",
        f"Every row's `metadata.tokens` is its length in tokens of the tokenizer {_code(t.tokenizer)} "
        f"(SHA-256 `{t.sha256}` of its vocabulary, rules and chat template): {_counted(m)}. "
        "Of the rows written:",
        "",
    ]
    stats = [(name, getattr(t, name)) for name in ("min", "median", "p95", "max")]
    lines += _table(
        ("statistic", "tokens"),
        [("rows", t.rows), *[(k, "-" if v is None else v) for k, v in stats]],
    )
    if t.max_tokens is None:
        lines.append("No budget was set: no row was left out for its length.")
    elif t.fit == "split":
        lines.append(
            f"Rows over {t.max_tokens} tokens were cut at a turn boundary to fit ({t.cut} rows: "
            "the system message, then the latest turns; `metadata.context_cut` says how many "
            "messages of the context were left out); rows no cut brings within the budget are "
            "not in the files (`skipped: over_token_budget` below)."
        )
    else:
        lines.append(
            f"Rows over {t.max_tokens} tokens are not in the files "
            "(`skipped: over_token_budget` below)."
        )
    return [*lines, ""]


def _counted(m: Manifest) -> str:
    """What a row's count is, for the card's rows (docs/export.md, Token budgets)."""
    if m.kind == "nemo-gym":
        return (
            "the prompt the policy model is sent, the row's input and tools as the chat "
            "messages NeMo Gym's model server makes of them, through its chat template with "
            "the generation prompt"
        )
    if m.shape in ("native", "segment"):
        return (
            "the whole trajectory, the row's input and every turn after it as chat messages "
            "with the row's tools, through its chat template"
        )
    said = (
        "its chat template applied to the row's messages with the row's tools, as the trainer "
        "tokenizes them (prompt and completion together; for a preference pair, the longer "
        "of prompt + chosen and prompt + rejected)"
    )
    if not isinstance(m.tokens, msgspec.UnsetType) and m.tokens.images == PROCESSOR:
        said = (
            "the model's processor on the row's messages and images, as TRL's vision collator "
            "builds them: the processor's chat template on the messages (without tools: TRL's "
            "vision trainer does not pass them), each image counted as the image tokens the "
            "processor puts in its place"
        )
    elif m.options.get("images"):
        said += (
            "; an image counts as the placeholder the template writes for it, the image "
            "tokens a vision model's processor puts there are not counted (the tokenizer has "
            "no processor)"
        )
    return said


def _degradations(m: Manifest) -> list[str]:
    lines = ["## Degradations", ""]
    if not m.degradations:
        return [*lines, "No fact read lost content at conversion.", ""]
    keep = bool(m.options.get("keep_degraded"))
    lines += [
        "Content the source format could not carry, by the facts read that carry it "
        "(docs/canonical.md). Lossy ones (marked) "
        + (
            "were kept: `--keep-degraded` was given, so rows may hold these calls."
            if keep
            else "skip the rows built on them (`degraded_fact` below); the others are in rows."
        ),
        "",
    ]
    rows = [
        (f"`{k}`", n, "yes" if k in LOSSY_DEGRADATIONS else "", DEGRADATION_REASONS.get(k, ""))
        for k, n in m.degradations.items()
    ]
    return lines + _table(("degradation", "facts", "lossy", "meaning"), rows)


def _left_out(m: Manifest) -> list[str]:
    rows: list[tuple[object, ...]] = [
        (f"skipped: `{k}`", n, SKIP_REASONS.get(k, "")) for k, n in m.skipped.items()
    ]
    if m.filtered:
        rows.append(("filtered", m.filtered, "rows the --where conditions left out"))
    rows += [(f"changed: `{k}`", n, PROFILE_CHANGES.get(k, "")) for k, n in m.changes.items()]
    rows += [
        (f"segment start: `{k}`", n, SPLIT_REASONS.get(k, "")) for k, n in m.derive.splits.items()
    ]
    if m.derive.alternatives:
        rows.append(("alternative choices", m.derive.alternatives, ALTERNATIVES))
    if m.derive.richer_dropped:
        rows.append(("captures richer than the one read", m.derive.richer_dropped, RICHER))
    rows += [
        (f"feedback not joined: `{k}`", n, FEEDBACK_DROP_REASONS.get(k, ""))
        for k, n in m.feedback.dropped.items()
    ]
    if not rows:
        return ["## Rows left out or changed", "", "None.", ""]
    return ["## Rows left out or changed", "", *_table(("what", "count", "meaning"), rows)]


def _provenance(m: Manifest) -> list[str]:
    p = m.provenance
    lines = ["## Provenance", ""]
    if p.command is not None:
        lines += ["```", shlex.join(p.command), "```", ""]
    if p.store is not None:
        lines.append(f"- store: {_code(p.store)}")
    for path in p.facts or ():
        lines.append(f"- fact file: {_code(path)}")
    if p.command is None and p.store is None and not p.facts:
        lines.append("- input: facts given in memory to the export library")
    for name, value in (p.filters or {}).items():
        lines.append(f"- filter `{name}`: {_code(orjson.dumps(value).decode())}")
    lines += [
        f"- facts: {m.facts.count}, SHA-256 `{m.facts.sha256}` (of their lines in `facts.sha256`)",
        f"- feedback: {m.feedback.count} read, {m.feedback.joined} joined, "
        f"SHA-256 `{m.feedback.sha256}`",
        "",
    ]
    return lines
