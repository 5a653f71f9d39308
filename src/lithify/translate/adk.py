"""Google ADK's own ``call_llm`` spans to canonical content (docs/sources/adk.md).

ADK (``google-adk``) in its legacy telemetry format (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``)
writes one ``call_llm`` span per model call, holding the call in ADK's own keys:
``gcp.vertex.agent.llm_request`` (the google-genai SDK call as JSON: ``model``, ``config`` with
``system_instruction``, ``tools`` and the generation parameters, ``contents`` in snake_case) and
``gcp.vertex.agent.llm_response`` (ADK's ``LlmResponse``: ``content``, ``finish_reason``,
``usage_metadata``, ``model_version``, without thought signatures), and the session as
``gcp.vertex.agent.session_id``. Both are read as the Gemini exchange they describe, by the
Gemini translator, so the span and the provider traffic give the same messages. ``"{}"`` is what
ADK writes with its content capture off: no content.

The span's ``gen_ai.system`` is ``gcp.vertex.agent`` (ADK itself, not the provider). The spans
around it (``invocation``, ``invoke_agent``, ``execute_tool``) are no model calls; the provider
call itself is described again by the ``generate_content`` span under it (ADK's, or the
google-genai instrumentation's): telemetry.py gives the ``call_llm`` fact that span's identity
(``translate_span``'s ``call_span``), so the identity rule reads the two as one call.
"""

from __future__ import annotations

from typing import Any

from lithify.model import InferenceCall
from lithify.translate import gemini
from lithify.translate._common import Degradations, json_value
from lithify.translate._telemetry import Content, metadata

SOURCE = "adk"

REQUEST = "gcp.vertex.agent.llm_request"
RESPONSE = "gcp.vertex.agent.llm_response"
SESSION = "gcp.vertex.agent.session_id"
# The candidate fields an LlmResponse carries flat (its content, and what sits beside it).
_CANDIDATE_FIELDS = ("content", "finishReason", "groundingMetadata", "citationMetadata")


def is_call_llm(attrs: dict[str, Any]) -> bool:
    """ADK's ``call_llm`` span (legacy format): it holds the request and response JSON."""
    return REQUEST in attrs or RESPONSE in attrs


def _object(value: Any, deg: Degradations) -> dict[str, Any] | None:
    if isinstance(value, str | bytes):
        try:
            value = json_value(value, deg)
        except (ValueError, RecursionError):
            deg.add("malformed_messages")
            return None
    if value is None:
        return None
    if not isinstance(value, dict):
        deg.add("malformed_messages")
        return None
    return value or None  # "{}": ADK's content capture off


def _response(llm: dict[str, Any]) -> dict[str, Any]:
    """An ``LlmResponse`` as the ``GenerateContentResponse`` it was made from: one candidate."""
    candidate = {
        key: value
        for key in _CANDIDATE_FIELDS
        if (value := gemini.part_field(llm, key)) is not None
    }
    out: dict[str, Any] = {"candidates": [candidate] if candidate else []}
    for key in ("usageMetadata", "modelVersion"):
        value = gemini.part_field(llm, key)
        if value is not None:
            out[key] = value
    return out


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's content when the span is an ADK ``call_llm`` span with content, else None."""
    if not is_call_llm(attrs):
        return None
    request = _object(attrs.get(REQUEST), deg)
    llm = _object(attrs.get(RESPONSE), deg)
    if request is None and llm is None:
        return None
    response = _response(llm) if llm is not None else None
    try:
        call = gemini.translate(request, response)
    except RecursionError:
        deg.add("malformed_messages")
        return None
    if not isinstance(call, InferenceCall):
        deg.add("malformed_messages")
        return None
    # The span's own screen counts the credentials it replaces (build): not twice.
    deg.update({k: n for k, n in call.degradations.items() if not k.startswith("redacted_")})
    fields = metadata(attrs)
    # What the JSON states wins over the span's own keys (which hold fewer parameters).
    fields["model"] = call.model or fields["model"]
    fields["request"] = {**fields["request"], **call.request}
    for key in ("input_tokens", "output_tokens", "model_call_id"):
        if getattr(call, key) is not None:
            fields[key] = getattr(call, key)
    return Content(SOURCE, call.input_messages, call.output_messages, call.tools, metadata=fields)


def session_of(attrs: dict[str, Any]) -> str | None:
    v = attrs.get(SESSION)
    return v if isinstance(v, str) and v else None
