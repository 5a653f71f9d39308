"""What each page shows, as plain data: the JSON twin of a page is exactly this, and its HTML is
a template over it. Built from the store API and derivation's own functions, never from
copies of them."""

from __future__ import annotations

import base64
import getpass
import re
import shlex
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode

import msgspec
import orjson

from lithify import __version__
from lithify.core.hashing import stable_hash
from lithify.core.times import datetime_to_rfc3339
from lithify.derive import SPLIT_REASONS
from lithify.derive.feedback import FeedbackIndex
from lithify.derive.segments import segment_session
from lithify.export import FORMATS, ExportOptions, ExportSummary, export, from_store
from lithify.export.profiles import SUPPORTED
from lithify.model import (
    DEGRADATION_REASONS,
    BlobPart,
    Feedback,
    InferenceCall,
    Message,
    ToolCallPart,
    ToolCallResponsePart,
)
from lithify.store import FactFilter, FactStore, FeedbackFilter, FeedbackValue
from lithify.translate.redact import MARKER
from lithify.ui import render
from lithify.ui.listing import selected_sessions

SOURCE = "ui"


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _feedback(items: Iterable[Feedback]) -> list[dict[str, Any]]:
    return [
        {
            "feedback_id": f.feedback_id,
            "target_kind": f.target_kind,
            "target_id": f.target_id,
            "name": f.name,
            "value": f.value,
            "source": f.source,
            "observed_at": f.observed_at,
            "by": f.raw.get("by") if isinstance(f.raw, dict) else None,
        }
        for f in items
    ]


# -- overview ----------------------------------------------------------------------------------
def overview(store: FactStore) -> dict[str, Any]:
    stats = store.stats(session_limit=10)
    coverage = store.feedback_coverage()
    return {
        "store": {"url": store.url, "size_bytes": store.size()},
        "facts": stats.facts + stats.dropped_captures,  # every capture stored
        "calls": stats.facts,
        "sessions": stats.sessions,
        "input_tokens": stats.input_tokens,
        "output_tokens": stats.output_tokens,
        "dropped_captures": stats.dropped_captures,
        "id_collisions": stats.id_collisions,
        "models": _builtins(stats.by_model),
        "providers": _builtins(stats.by_provider),
        "sources": _builtins(stats.by_source),
        "top_sessions": _builtins(stats.by_session),
        "degradations": [
            {**_builtins(d), "meaning": DEGRADATION_REASONS.get(d.reason, "")}
            for d in stats.degradations
        ],
        "feedback": {
            "facts": coverage.feedback,
            "by_name": [{"name": n, "count": c} for n, c in coverage.by_name],
            "calls": coverage.calls,
            "sessions": coverage.sessions,
        },
        "activity": _builtins(store.activity()),
    }


CHART_HEIGHT = 120  # the overview chart's bars, in SVG units (the picture scales to its box)
CHART_DAYS = 30  # the narrowest chart, in days


def _date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def chart(activity: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Bars of ``key`` per day as SVG geometry: one unit-wide bar a day, gaps for days
    without calls, heights scaled to the largest. Calls without a time (or with one that is no
    date) have no day and no bar."""
    dated = [(day, a) for a in activity if (day := _date(a["day"])) is not None]
    if not dated:
        return {"width": 0, "height": CHART_HEIGHT, "bars": [], "max": 0}
    first = dated[0][0]
    span = (dated[-1][0] - first).days + 1
    width = max(span, CHART_DAYS)  # a short history stays narrow bars, at the right
    top = max(a[key] for _, a in dated) or 1
    bars = []
    for day, a in dated:
        x = width - span + (day - first).days
        h = round(CHART_HEIGHT * a[key] / top, 2)
        bars.append({"x": x, "y": CHART_HEIGHT - h, "h": h, "day": a["day"], "value": a[key]})
    return {"width": width, "height": CHART_HEIGHT, "bars": bars, "max": top}


# -- a session ---------------------------------------------------------------------------------
def _feedback_facts(
    store: FactStore, session_id: str, calls: list[InferenceCall]
) -> list[Feedback]:
    """Every feedback fact on the session, its calls and their traces."""
    ids = [c.inference_call_id for c in calls]
    traces = sorted({c.trace_id for c in calls if c.trace_id})
    found = list(store.iter_feedback(FeedbackFilter(target_kind="session", target_id=session_id)))
    if ids:
        found += store.iter_feedback(FeedbackFilter(target_kind="call", target_id=ids))
    if traces:
        found += store.iter_feedback(FeedbackFilter(target_kind="trace", target_id=traces))
    return found


def _results(messages: Iterable[Message]) -> dict[str, Any]:
    """Tool results by the id of the call they answer: shown beside it."""
    out: dict[str, Any] = {}
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolCallResponsePart):
                out.setdefault(p.id, p.result)
    return out


def media_url(call_id: str, sha256: str) -> str:
    return f"/media/{sha256}?{urlencode({'call': call_id})}"


# -- degradations on the part they concern -------------------------------------------------------
# A fact counts its degradations per call, not per part (docs/canonical.md): a part is marked only
# where it shows the degradation itself, by the form docs/canonical.md gives it. The rest concern
# the call as far as the fact records, and are shown on the call.
SYNTHESIZED_ID = re.compile(r"lithify_[0-9a-f]{24}")  # docs/canonical.md, Parts: Ids
REPLACEMENT = "\ufffd"  # what invalid_text puts for each bad character
REDACTIONS = tuple(r for r in DEGRADATION_REASONS if r.startswith("redacted_"))
LOCATED = frozenset(
    {"content_reference", "synthesized_id", "orphan_tool_response", "malformed_arguments",
     "invalid_text", *REDACTIONS}
)  # fmt: skip


class Marks:
    """Which parts of one call show which of its degradations."""

    def __init__(self, fact: InferenceCall) -> None:
        self.reasons = {r for r in fact.degradations if r in LOCATED}
        self.calls: set[str] = set()
        empty = 0
        if self.reasons:
            for m in (*fact.input_messages, *fact.output_messages):
                for p in m.parts:
                    if isinstance(p, ToolCallPart):
                        self.calls.add(p.id)
                        empty += not p.arguments
        # Malformed arguments are carried as {}: certain only when every empty call is one.
        self.empty_is_malformed = empty == fact.degradations.get("malformed_arguments", 0)

    def of(self, p: dict[str, Any]) -> list[str]:
        """The degradations part ``p`` (as builtins) shows, in the closed list's order."""
        if not self.reasons:
            return []
        kind, found = p.get("type"), set()
        if kind in ("file", "uri"):
            found.add("content_reference")
        elif kind == "tool_call":
            if SYNTHESIZED_ID.fullmatch(p["id"]):
                found.add("synthesized_id")
            if not p["arguments"] and self.empty_is_malformed:
                found.add("malformed_arguments")
        elif kind == "tool_call_response" and SYNTHESIZED_ID.fullmatch(p["id"]):
            # an answer to a synthesized call reuses its id; one matching no call is an orphan
            found.add("synthesized_id" if p["id"] in self.calls else "orphan_tool_response")
        if self.reasons & {"invalid_text", *REDACTIONS} and kind != "blob":
            try:
                texts = list(_strings(p))
            except RecursionError:  # nested deeper than Python recurses: left unmarked
                texts = []
            if any(REPLACEMENT in t for t in texts):
                found.add("invalid_text")
            if any(MARKER in t for t in texts):
                found.update(REDACTIONS)
        return [r for r in DEGRADATION_REASONS if r in found and r in self.reasons]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included (a key can be a redacted credential too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _shown(messages: Any, call_id: str, marks: Marks | None = None) -> Any:
    """Messages as a page shows them: a blob's bytes are not inlined but linked (``url``, served
    by ``media``), so a session of screenshots stays a small page; a part that shows one of the
    call's degradations names it (``degradations``)."""
    out = _builtins(messages)
    for m in out if isinstance(out, list) else [out]:
        for p in m["parts"]:
            if marks is not None and (found := marks.of(p)):
                p["degradations"] = found
            if p.get("type") == "blob":
                del p["content"]
                p["url"] = media_url(call_id, p["sha256"])
    return out


# Media a browser may show inline; anything else (SVG, HTML, PDF) is only ever downloaded, so
# a hostile blob cannot run in the viewer's origin.
INLINE_MEDIA = frozenset(
    {
        "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp",
        "audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3", "audio/ogg", "audio/webm",
        "audio/flac", "audio/aac", "video/mp4", "video/webm", "video/ogg",
    }
)  # fmt: skip


def media(store: FactStore, call_id: str, sha256: str) -> tuple[bytes, str] | None:
    """The bytes of a blob part of a call, with the content type to serve them under."""
    fact = store.get_fact(call_id)
    if fact is None:
        return None
    for m in (*fact.input_messages, *fact.output_messages):
        for p in m.parts:
            if isinstance(p, BlobPart) and p.sha256 == sha256:
                mime = (p.mime_type or "").lower()
                return base64.b64decode(p.content), mime if mime in INLINE_MEDIA else ""
    return None


def _turn(index: FeedbackIndex, turn: Any, own: dict[str, list[Feedback]]) -> dict[str, Any]:
    call: InferenceCall = turn.call
    chosen = call.output_messages[turn.chosen] if call.output_messages else None
    marks = Marks(call)
    return {
        "call_id": call.inference_call_id,
        "model": call.model,
        "provider": call.provider,
        "source": call.source.name,
        "started_at": call.started_at or call.observed_at,
        "duration_ms": call.duration_ms,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "finish_reason": chosen.finish_reason if chosen else None,
        "degradations": call.degradations,
        "opaque_reasoning": call.degradations.get("opaque_reasoning", 0),
        "tools": [t.name for t in call.tools],
        "new_messages": _shown(turn.new_messages, call.inference_call_id, marks),
        "output": _shown(chosen, call.inference_call_id, marks) if chosen else None,
        "chosen": turn.chosen,
        "alternatives": [
            _shown(call.output_messages[i], call.inference_call_id, marks)
            for i in turn.alternatives
        ],
        "feedback_joined": {n: f.value for n, f in index.for_call(call).items()},
        "feedback": _feedback(own.get(call.inference_call_id, [])),
    }


def session(store: FactStore, session_id: str) -> dict[str, Any] | None:
    """A session as its segments (derivation's own), calls in order; None when it has none."""
    calls = list(store.iter_facts(FactFilter(session_id=session_id, order="session")))
    if not calls:
        return None
    items = _feedback_facts(store, session_id, calls)
    aliases = store.call_aliases(f.target_id for f in items if f.target_kind == "call")
    index = FeedbackIndex(items, aliases)
    own: dict[str, list[Feedback]] = {}
    for f in items:
        if f.target_kind == "call":
            own.setdefault(aliases.get(f.target_id, f.target_id), []).append(f)
    segments = [index.attach(s) for s in segment_session(session_id, calls)]
    return {
        "session_id": session_id,
        "calls": len(calls),
        "input_tokens": sum(c.input_tokens or 0 for c in calls),
        "output_tokens": sum(c.output_tokens or 0 for c in calls),
        "first_at": calls[0].started_at or calls[0].observed_at,
        "last_at": calls[-1].started_at or calls[-1].observed_at,
        "feedback": _feedback(f for f in items if f.target_kind != "call"),
        "feedback_joined": {n: f.value for n, f in index.for_session(session_id).items()},
        "segments": [
            {
                "segment_id": s.segment_id,
                "index": s.index,
                "split_reason": s.split_reason,
                "split_meaning": SPLIT_REASONS.get(s.split_reason or "", ""),
                "feedback_joined": {f.name: f.value for f in s.feedback},
                "tool_results": _results(m for t in s.turns for m in t.new_messages),
                "turns": [_turn(index, t, own) for t in s.turns],
            }
            for s in segments
        ],
    }


# -- a call ------------------------------------------------------------------------------------
def call(store: FactStore, call_id: str) -> dict[str, Any] | None:
    """A call's captures (the one reads and exports use marked) with their raw payloads."""
    captures = store.captures(call_id)
    fact = store.get_fact(call_id)
    if fact is None and not captures:
        return None
    return {
        "call_id": call_id,
        "session_id": fact.session_id if fact else None,
        "fact": _builtins(fact) if fact else None,
        "degradations": fact.degradations if fact else {},
        "tool_results": _results(fact.input_messages) if fact else {},
        "input_messages": _shown(fact.input_messages, call_id, Marks(fact)) if fact else [],
        "output_messages": _shown(fact.output_messages, call_id, Marks(fact)) if fact else [],
        "captures": [
            {
                "inference_call_id": c.fact.inference_call_id,
                "call_id": c.call_id,
                "used": c.first and c.call_id == call_id,
                "source": c.fact.source.name,
                "session_id": c.fact.session_id,
                "observed_at": c.fact.observed_at,
                "degradations": c.fact.degradations,
                "raw": _builtins(c.fact.raw),
            }
            for c in captures
        ],
    }


# -- curate ------------------------------------------------------------------------------------
class Conflict(Exception):
    """Feedback of that name with another value is already on the target: both would be
    dropped as ambiguous, so it is refused (facts are never edited)."""


class NoTarget(LookupError):
    """The call or session to label does not exist."""


def who(user: str | None) -> str:
    """The token's name, else (on loopback) the local user."""
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


def _same(a: FeedbackValue, b: FeedbackValue) -> bool:
    """Equal as JSON values, as derivation compares them: 1 is 1.0, true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return a == b


def _conflict(
    store: FactStore, target_kind: str, target_id: str, name: str, value: FeedbackValue
) -> FeedbackValue | None:
    """The other value of ``name`` already on the target, if there is one."""
    for f in store.iter_feedback(
        FeedbackFilter(target_kind=target_kind, target_id=target_id, name=name)
    ):
        if not _same(f.value, value):
            return f.value
    return None


def _ui_feedback(
    target_kind: str, target_id: str, name: str, value: FeedbackValue, by: str
) -> Feedback:
    if not name or len(name) > 200:
        raise ValueError("a feedback name is 1 to 200 characters")
    return Feedback(
        feedback_id=stable_hash(SOURCE, target_kind, target_id, name, value),
        target_kind=target_kind,  # type: ignore[arg-type]
        target_id=target_id,
        name=name,
        value=value,
        source=SOURCE,
        observed_at=datetime_to_rfc3339(datetime.now(UTC)),
        raw={"by": by, "via": f"lithify ui {__version__}"},
    )


def curate(
    store: FactStore, target_kind: str, target_id: str, name: str, value: FeedbackValue, by: str
) -> dict[str, Any]:
    """Store one feedback fact from the viewer (source ``ui``); the same label again is the
    same fact."""
    if target_kind == "session":
        if store.count(FactFilter(session_id=target_id)) == 0:
            raise NoTarget(f"no session {target_id!r}")
    elif target_kind == "call":
        if store.get_fact(target_id) is None:
            raise NoTarget(f"no call {target_id!r}")
    else:
        raise ValueError("a label targets a call or a session")
    fb = _ui_feedback(target_kind, target_id, name, value, by)
    other = _conflict(store, target_kind, target_id, name, value)
    if other is not None:
        raise Conflict(
            f"{target_kind} {target_id!r} already has {name} = {other!r}: feedback facts "
            "are never edited, and two values of one name are both dropped as ambiguous"
        )
    result = store.insert_feedback([fb])
    return {"stored": result.inserted, "duplicates": result.duplicates, **_feedback([fb])[0]}


# -- a selection: every session a filter selects -------------------------------------------------
def curate_selection(
    store: FactStore, params: dict[str, str], name: str, value: FeedbackValue, by: str
) -> dict[str, Any]:
    """The same feedback on every session the filter selects, in one write; a session that
    already has another value of that name is left as it is and named."""
    facts: list[Feedback] = []
    conflicts: list[str] = []
    sessions = selected_sessions(store, params)
    for sid in sessions:
        if _conflict(store, "session", sid, name, value) is not None:
            conflicts.append(sid)
        else:
            facts.append(_ui_feedback("session", sid, name, value, by))
    result = store.insert_feedback(facts)
    return {
        "sessions": len(sessions),
        "stored": result.inserted,
        "duplicates": result.duplicates,
        "conflicts": conflicts,
    }


# -- rows ----------------------------------------------------------------------------------------
EXPORT_KEYS = ("kind", "profile", "format")


class ExportRequest(msgspec.Struct, frozen=True):
    sessions: tuple[str, ...]
    kind: str
    profile: str
    fmt: str


def export_options(params: dict[str, str]) -> tuple[str, str, str]:
    """The kind, profile and format a Rows or Export page asks for; ``ValueError`` names a
    bad one."""
    kind = params.get("kind") or "sft"
    if kind not in SUPPORTED:
        raise ValueError(f"kind must be one of {', '.join(SUPPORTED)}")
    profile = params.get("profile") or SUPPORTED[kind][0]
    if profile not in SUPPORTED[kind]:
        raise ValueError(f"profile for {kind} must be one of {', '.join(SUPPORTED[kind])}")
    fmt = params.get("format") or "jsonl"
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    return kind, profile, fmt


def rows_request(params: dict[str, str]) -> ExportRequest:
    """One session's rows (the Rows page), as JSON lines."""
    sid = params.get("session", "")
    if not sid:
        raise ValueError("session: required")
    kind, profile, _ = export_options(params)
    return ExportRequest((sid,), kind, profile, "jsonl")


def selection_request(store: FactStore, params: dict[str, str]) -> ExportRequest:
    """The sessions the list's filter selects, with the export options (the Export page)."""
    kind, profile, fmt = export_options(params)
    query = {k: v for k, v in params.items() if k not in EXPORT_KEYS}
    return ExportRequest(tuple(selected_sessions(store, query)), kind, profile, fmt)


def export_command(req: ExportRequest) -> str:
    """The ``lithify export`` command that writes what the page shows."""
    argv = ["lithify", "export", req.kind, "--profile", req.profile]
    if req.fmt != "jsonl":
        argv += ["--format", req.fmt]
    for sid in req.sessions:
        argv += ["--session", sid]
    return shlex.join([*argv, "-o", "OUT"])


def export_to(store: FactStore, req: ExportRequest, out_dir: str | Path) -> ExportSummary:
    """Run the export pipeline itself over the request's sessions into ``out_dir``."""
    options = ExportOptions(kind=req.kind, profile=req.profile, fmt=req.fmt)
    selection = from_store(store, FactFilter(session_id=list(req.sessions)))
    return export(selection, out_dir, options)


def _options(req: ExportRequest, summary: ExportSummary) -> dict[str, Any]:
    return {
        "kind": req.kind,
        "profile": req.profile,
        "format": req.fmt,
        "kinds": {k: list(v) for k, v in SUPPORTED.items()},
        "formats": list(FORMATS),
        "schema": summary.schema,
        "rows_written": summary.rows,
        "skipped": summary.skipped,
        "filtered": summary.filtered,
        "changes": summary.changes,
        "command": export_command(req),
    }


def chat_template(params: dict[str, str]) -> str | None:
    """The chat template a Rows page asks for (``template``); ``ValueError`` names a bad one.
    Asked where TRL is not installed, it is None: the page says so."""
    name = params.get("template") or None
    names = render.templates()
    if name is None or not names:
        return None
    if name not in names:
        raise ValueError(f"template must be one of TRL's chat templates: {', '.join(names)}")
    return name


def _rendering(req: ExportRequest, template: str | None) -> dict[str, Any]:
    names = render.templates() if req.kind == "sft" else []
    note = None
    if req.kind == "sft" and not names:
        note = render.NOT_INSTALLED
    return {"templates": names, "template": template if names else None, "note": note}


def rows(
    store: FactStore, req: ExportRequest, template: str | None = None
) -> dict[str, Any] | None:
    """The rows ``lithify export`` writes for one session, run through the export pipeline itself
    into a scratch folder and read back, so each row's ``line`` is the file's bytes; None when
    the session has no calls. With ``template``, each SFT row's conversation rendered through
    that chat template of TRL's (``rendered``)."""
    if store.count(FactFilter(session_id=list(req.sessions))) == 0:
        return None
    rendering = _rendering(req, template)
    with tempfile.TemporaryDirectory(prefix="lithify-ui-rows-") as tmp:
        summary = export_to(store, req, tmp)
        out: list[dict[str, Any]] = []
        for split, path in sorted(summary.files.items()):
            with open(path, "rb") as f:
                for line in f:
                    row = orjson.loads(line)
                    meta = row.get("metadata") if isinstance(row, dict) else None
                    out.append(
                        {
                            "split": split,
                            "segment_id": meta.get("segment_id")
                            if isinstance(meta, dict)
                            else None,
                            "line": line.decode("utf-8").rstrip("\n"),
                            "row": row,
                        }
                    )
    if rendering["template"]:
        for r in out:
            r["rendered"] = render.render(rendering["template"], r["row"])
    return {
        "session_id": req.sessions[0],
        **_options(req, summary),
        "chat_template": rendering,
        "rows": out,
    }


def export_selection(store: FactStore, req: ExportRequest) -> dict[str, Any]:
    """What exporting the selection writes (the Export page), counted by a dry run into a
    scratch folder; the download runs the same export again into the archive."""
    with tempfile.TemporaryDirectory(prefix="lithify-ui-export-") as tmp:
        summary = export_to(store, req, tmp)
    return {"sessions": list(req.sessions), **_options(req, summary)}


def export_archive(store: FactStore, req: ExportRequest, into: IO[bytes]) -> None:
    """The export's folder (rows, manifest, card and any files beside them) as a zip archive,
    entries in name order with a fixed time, so the same facts give the same archive."""
    with tempfile.TemporaryDirectory(prefix="lithify-ui-export-") as tmp:
        export_to(store, req, tmp)
        root = Path(tmp)
        with zipfile.ZipFile(into, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(path.relative_to(root).as_posix(), (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with path.open("rb") as src, z.open(info, "w") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
