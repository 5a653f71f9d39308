"""Telemetry to facts: one span (or one log-event group) in, one fact or one skip out.

The message content of a span follows one of five conventions, tried in order: the OTel GenAI
semantic conventions (``genai``), OpenLLMetry's flattened attributes (``openllmetry``),
OpenInference (``openinference``), the Vercel AI SDK's own keys (``vercel_ai``) and Google
ADK's ``call_llm`` JSON (``adk``). The
metadata (model, provider, usage, sampling parameters, session) is read here, once, from
whichever keys the span carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from lithify.core.hashing import stable_hash
from lithify.model import Feedback, InferenceCall, Skip
from lithify.translate import adk, feedback, genai, openinference, openllmetry, vercel_ai
from lithify.translate._common import Degradations
from lithify.translate._telemetry import Content, build, session_of, timing
from lithify.translate.otlp import LogRecord, Span

_EXTRACTORS = (
    genai.span_content,
    openllmetry.span_content,
    openinference.span_content,
    vercel_ai.span_content,
    adk.span_content,
)

_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
_GENAI_MARKERS = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "llm.model_name",
)


def is_agent_span(attrs: dict[str, Any]) -> bool:
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op in _AGENT_OPERATIONS:
        return True
    if str(attrs.get("openinference.span.kind", "")).upper() == "AGENT":
        return True
    if vercel_ai.is_run_span(attrs):  # ai.generateText, ai.streamText: the run around its calls
        return True
    return str(attrs.get("traceloop.span.kind")) in ("agent", "workflow")


def is_model_call(attrs: dict[str, Any]) -> bool:
    """A span that describes a model call, whether or not its content was captured."""
    if is_agent_span(attrs):
        return False
    op = attrs.get("gen_ai.operation.name")
    if op is not None:
        return op in ("chat", "text_completion", "generate_content", "completion", "responses")
    if str(attrs.get("openinference.span.kind", "")).upper() == "LLM":
        return True
    return any(k in attrs for k in _GENAI_MARKERS)


def _convention(attrs: dict[str, Any]) -> str:
    """The source of a span without content, by the convention its metadata keys follow."""
    if "openinference.span.kind" in attrs or "llm.model_name" in attrs:
        return openinference.SOURCE
    if "llm.request.type" in attrs or any(k.startswith("traceloop.") for k in attrs):
        return openllmetry.SOURCE
    if vercel_ai.is_call_span(attrs):
        return vercel_ai.SOURCE
    return genai.SOURCE


def _span_identity(trace_id: str | None, span_id: str | None) -> tuple[Any, ...] | None:
    return ("otlp", trace_id, span_id) if trace_id and span_id else None


def translate_span(
    span: Span, *, under_agent: bool = False, raw: Any = None, call_span: str | None = None
) -> InferenceCall | Skip:
    """One span to a fact; ``raw`` overrides what is kept (a flat attribute map keeps itself).
    A model-call span without content gives its metadata only (``content_not_captured``).
    ``call_span``: the span that describes the same provider call (under an ADK ``call_llm``
    span), whose identity the fact takes so the two are read as one call."""
    attrs = span.attributes
    if is_agent_span(attrs):
        # An agent run span may repeat the run's messages (Pydantic AI's pydantic_ai.all_messages
        # and gen_ai.system_instructions, semconv's opt-in invoke_agent content): a summary of
        # the run, not a model call. The calls are the spans under it.
        return Skip("not_genai", f"span {span.name!r}")
    # Synthesized tool-call ids hang off the call's identity: the span, else the document itself.
    seed = (
        f"{span.trace_id}:{span.span_id}"
        if span.trace_id and span.span_id
        else stable_hash(span.to_raw() if raw is None else raw)
    )
    for extract in _EXTRACTORS:
        deg = Degradations()
        content = extract(attrs, span.events, deg, seed)
        if content is not None:
            break
    else:
        if not is_model_call(attrs):
            return Skip("not_genai", f"span {span.name!r}")
        if not (span.trace_id and span.span_id):
            # Nothing could join it to the capture that holds the content.
            return Skip("content_not_captured", f"span {span.name!r} without span context")
        # Capture off, or the content on log events (openai-v2's default mode): the span still
        # holds the call's model, usage, response id, sampling and session. A metadata-only
        # capture of the call, ranked after any capture with messages (docs/store.md, Call
        # identity). What an extractor counted before finding no content is not the fact's.
        deg = Degradations()
        deg.add("content_not_captured")
        if vercel_ai.is_call_span(attrs):  # recordInputs and recordOutputs off
            content = vercel_ai.metadata_only(attrs, deg)
        else:
            content = Content(
                _convention(attrs),
                output_messages=genai.span_finishes(attrs),
                tools=genai.span_tools(attrs, deg),
            )
    deg.add("invalid_text", span.repaired)
    session = session_of(attrs)
    if session is None and content.source == vercel_ai.SOURCE:
        session = vercel_ai.session_of(attrs)
    if session is None:
        session = adk.session_of(attrs)
    if session is None and under_agent and span.trace_id:
        session = span.trace_id
    return build(
        content,
        deg,
        attrs,
        identity=_span_identity(span.trace_id, call_span or span.span_id),
        raw=span.to_raw() if raw is None else raw,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        session_id=session,
        times=timing(span.start_time_unix_nano, span.end_time_unix_nano),
        screened=span.screened and raw is None,
        scope=span.scope,
    )


def translate_spans(spans: Iterable[Span]) -> Iterator[InferenceCall | Skip]:
    """Facts from one batch of spans (one OTLP request or file document).

    The batch is held in memory to see which spans sit under an agent span: such a call's
    session is its trace when nothing more explicit names one.
    """
    batch = list(spans)
    parents = {s.span_id: s.parent_span_id for s in batch if s.span_id}
    agents = {s.span_id for s in batch if s.span_id and is_agent_span(s.attributes)}

    def under_agent(span: Span) -> bool:
        seen: set[str] = set()
        pid = span.parent_span_id
        while pid and pid not in seen:
            if pid in agents:
                return True
            seen.add(pid)
            pid = parents.get(pid)
        return False

    # ADK's call_llm span and the generate_content span under it (ADK's own, or the google-genai
    # instrumentation's) describe one provider call: the call_llm fact takes the child's identity.
    calls: dict[str, str] = {}
    if any(adk.is_call_llm(s.attributes) for s in batch):
        for s in batch:
            child = s.parent_span_id and s.span_id and not adk.is_call_llm(s.attributes)
            if child and is_model_call(s.attributes):
                calls.setdefault(s.parent_span_id, s.span_id)

    for span in batch:
        yield translate_span(
            span,
            under_agent=bool(agents) and under_agent(span),
            call_span=calls.get(span.span_id) if span.span_id and calls else None,
        )


def translate_attributes(attrs: dict[str, Any], *, raw: Any = None) -> InferenceCall | Skip:
    """A flat attribute map (as trace stores export them): no OTLP identity, so the fact's id
    is a hash of the document kept on ``raw`` (the map itself unless given)."""
    span = Span(None, None, None, "", 0, None, None, attrs)
    return translate_span(span, raw=attrs if raw is None else raw)


def translate_logs(records: Iterable[LogRecord]) -> Iterator[InferenceCall | Feedback | Skip]:
    """Facts from one batch of log records: GenAI events grouped by the span they belong to,
    evaluation results as feedback."""
    calls: list[LogRecord] = []
    evaluations: list[LogRecord] = []
    for record in records:
        (evaluations if record.event_name == feedback.EVALUATION_EVENT else calls).append(record)
    yield from genai.log_facts(calls)
    for record in evaluations:
        yield feedback.from_evaluation(record)
