"""OpenLLMetry span attributes to canonical content (docs/sources/openllmetry-openinference.md).

Legacy Traceloop instrumentations flatten every message into indexed keys:
``gen_ai.prompt.N.{role,content,tool_call_id,tool_calls.M.{id,name,arguments}}`` and
``gen_ai.completion.N.{role,content,finish_reason,reasoning,tool_calls.M.*,function_call.*}``
(``llm.prompts`` / ``llm.completions`` before the gen_ai rename). Some producers (Koog, and the
deprecated semconv) put the whole prompt and completion in one ``gen_ai.prompt`` /
``gen_ai.completion`` value instead. Trace stores such as Langfuse hand the same keys back with
JSON-looking strings already parsed, so every value is accepted parsed or serialized.
"""

from __future__ import annotations

from typing import Any

from lithify.core.values import as_int
from lithify.model import ServerToolCallPart, ToolCallPart, ToolDefinition
from lithify.translate._common import (
    Degradations,
    finish_reason,
    finish_reasons,
    text_parts,
    tool_definition,
)
from lithify.translate._flat import (
    Ctx,
    Draft,
    Fields,
    Pairer,
    Piece,
    block_pieces,
    by_index,
    call_from_dict,
    decode_blocks,
    dumps_text,
    fill_finish,
    group_indexed,
    loads,
    merge_assistant_runs,
    message_draft,
    norm_role,
    reasoning_pieces,
    sub_indexed,
    tool_call,
)
from lithify.translate._telemetry import Content

SOURCE = "openllmetry"

_PROMPTS = ("gen_ai.prompt.", "llm.prompts.")
_COMPLETIONS = ("gen_ai.completion.", "llm.completions.")
_FUNCTIONS = "llm.request.functions."
# `refusal` replaces `content` when the model refused (the OpenAI chat wrapper), and
# `reasoning_content` is SGLang's; `tool_calls` alone is the whole list as one JSON value.
_FIELDS = frozenset(
    {
        "role",
        "content",
        "user",
        "tool_call_id",
        "finish_reason",
        "reasoning",
        "reasoning_content",
        "refusal",
        "tool_calls",
        "name",
        "",
    }
)
_EVENT_KEYS = {
    "gen_ai.content.prompt": "gen_ai.prompt",
    "gen_ai.content.completion": "gen_ai.completion",
}


def _is_message(fields: Fields) -> bool:
    return any(k in _FIELDS or k.startswith(("tool_calls.", "function_call.")) for k in fields)


def _pick(
    groups: dict[str, dict[int, Fields]], prefixes: tuple[str, ...]
) -> list[tuple[int, Fields]]:
    """The first prefix whose entries are OpenLLMetry messages (``llm.prompts.N.prompt.text`` is
    OpenInference's completions form, not this convention)."""
    for p in prefixes:
        entries = [(n, f) for n, f in by_index(groups[p]) if _is_message(f)]
        if entries:
            return entries
    return []


def _responses_output(content: Any) -> tuple[Any, Any] | None:
    """A Responses ``function_call_output`` OpenLLMetry serialized as ``{call_id, output}``."""
    if isinstance(content, str) and content.lstrip().startswith("{"):
        content = loads(content)
    if isinstance(content, dict) and set(content) == {"call_id", "output"}:
        return content["call_id"], content["output"]
    return None


# What the Responses instrumentation writes for a computer_call input item: the call's fields.
_COMPUTER_CALL = frozenset({"id", "call_id", "action"})


def _computer_call(content: Any) -> dict[str, Any] | None:
    """A Responses ``computer_call`` input item serialized as ``{id, call_id, action}`` (an
    answer that is JSON text rarely has exactly these keys and an action object)."""
    if isinstance(content, str) and content.lstrip().startswith("{"):
        content = loads(content)
    if (
        isinstance(content, dict)
        and set(content) <= _COMPUTER_CALL
        and "call_id" in content
        and isinstance(content.get("action"), dict)
    ):
        return content
    return None


def _flat_draft(ctx: Ctx, fields: Fields, default_role: str, position: tuple[Any, ...]) -> Draft:
    output = position[0] == "out"
    if set(fields) == {""}:
        # gen_ai.prompt.N holding the whole message (a trace store's parsed export)
        whole = fields[""]
        if isinstance(whole, dict):
            return _dict_draft(ctx, whole, default_role, position)
        return message_draft(
            ctx, role=None, default_role=default_role, content=whole, decode=True, position=position
        )
    role = fields.get("role")
    content = fields.get("content")
    if content is None and "user" in fields:
        content = fields["user"]  # legacy completions API: gen_ai.prompt.0.user
        role = role or "user"
    calls: list[ToolCallPart | ServerToolCallPart] = []
    nested = sub_indexed(fields, "tool_calls.")
    for m, f in nested:
        call = tool_call(
            ctx,
            f.get("id"),
            f.get("name", f.get("function.name")),
            f.get("arguments", f.get("function.arguments")),
            *position,
            "call",
            m,
        )
        if call is not None:
            calls.append(call)
    if not nested:
        calls = _listed_calls(ctx, fields.get("tool_calls"), position)
    # Older versions wrote only the first tool call as function_call.*: use it only when no
    # tool_calls entry carries the same call.
    if not nested and not calls and fields.get("function_call.name") is not None:
        call = tool_call(
            ctx,
            fields.get("function_call.id"),
            fields.get("function_call.name"),
            fields.get("function_call.arguments"),
            *position,
            "function_call",
        )
        if call is not None:
            calls.append(call)
    after = text_parts(fields.get("refusal"))  # after the content, as Chat Completions has it
    replay = not output and norm_role(role, default_role) == "assistant"
    if replay and (cc := _computer_call(content)):
        # The Responses instrumentation replays a computer call as its fields in `content`:
        # the computer tool called with its action, as the Responses translator names it.
        content = None
        cu = tool_call(ctx, cc.get("call_id"), "computer_call", cc["action"], *position, "cu")
        if cu is not None:
            calls.append(cu)
    elif role == "computer-call" and content is not None:
        # A computer_call_output of which the instrumentation keeps only the screenshot, as an
        # image_url block list. Its output is always a computer_screenshot (the Responses
        # translator's result); the image follows it.
        blocks = decode_blocks(content if isinstance(content, str) else dumps_text(content))
        if blocks is not None:
            content = {"type": "computer_screenshot"}
            after = block_pieces(ctx, blocks, *position) + after
    return message_draft(
        ctx,
        role=role,
        default_role=default_role,
        content=content,
        decode=True,
        position=position,
        tool_call_id=fields.get("tool_call_id"),
        name=fields.get("name"),
        before=reasoning_pieces(fields.get("reasoning_content"), fields.get("reasoning")),
        after=after,
        calls=calls,
        finish_reason=finish_reason(fields.get("finish_reason")) if output else None,
        unwrap_result=_responses_output,
    )


def _dict_draft(ctx: Ctx, d: dict[str, Any], default_role: str, position: tuple[Any, ...]) -> Draft:
    """One whole-message object: semconv ``{role, parts}`` or chat ``{role, content, …}``."""
    output = position[0] == "out"
    before: list[Piece] = reasoning_pieces(d.get("reasoning_content"), d.get("reasoning"))
    if isinstance(d.get("parts"), list):
        before += block_pieces(ctx, d["parts"], *position, "parts")
    content = d.get("content")
    if content is None and isinstance(d.get("text"), str):
        content = d["text"]  # the deprecated completion object {"text", "finish_reason"}
    calls = _listed_calls(ctx, d.get("tool_calls"), position)
    fc = d.get("function_call")
    if isinstance(fc, dict) and (call := call_from_dict(ctx, {"function": fc}, *position, "fc")):
        calls.append(call)
    return message_draft(
        ctx,
        role=d.get("role"),
        default_role=default_role,
        content=content,
        decode=False,
        position=position,
        tool_call_id=d.get("tool_call_id"),
        name=d.get("name"),
        before=before,
        after=text_parts(d.get("refusal")),
        calls=calls,
        finish_reason=finish_reason(d.get("finish_reason")) if output else None,
    )


def _listed_calls(
    ctx: Ctx, value: Any, position: tuple[Any, ...]
) -> list[ToolCallPart | ServerToolCallPart]:
    """A message's whole ``tool_calls`` list, parsed or as one JSON string (some producers
    write it so rather than as ``tool_calls.M.*`` keys); JSON that is no list of calls counts
    ``malformed_messages``."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = loads(value) if value.lstrip().startswith("[") else None
    if not isinstance(value, list):
        ctx.deg.add("malformed_messages")
        return []
    calls: list[ToolCallPart | ServerToolCallPart] = []
    for m, c in enumerate(value):
        if not isinstance(c, dict):
            ctx.deg.add("malformed_messages")
        elif call := call_from_dict(ctx, c, *position, "call", m):
            calls.append(call)
    return calls


_MESSAGE_KEYS = frozenset(
    {"role", "content", "parts", "text", "tool_calls", "function_call", "tool_call_id"}
)


def _text_draft(ctx: Ctx, value: Any, default_role: str, position: tuple[Any, ...]) -> Draft:
    return message_draft(
        ctx, role=None, default_role=default_role, content=value, decode=False, position=position
    )


def _whole(ctx: Ctx, value: Any, default_role: str, side: str) -> list[Draft]:
    """A whole prompt or completion value: a message list, one message, or plain text.

    JSON that is not shaped like messages is the text itself (a prompt may be JSON).
    """
    parsed = value
    if isinstance(value, str):
        parsed = loads(value) if value.lstrip()[:1] in ("[", "{") else None
    items = parsed if isinstance(parsed, list) else [parsed]
    if not items or not all(isinstance(i, dict) and not _MESSAGE_KEYS.isdisjoint(i) for i in items):
        text = value if isinstance(value, str) else dumps_text(value)
        return [_text_draft(ctx, text, default_role, (side, 0))]
    return [_dict_draft(ctx, i, default_role, (side, n)) for n, i in enumerate(items)]


def _tool_calls_only(d: Draft) -> bool:
    return bool(d.parts) and all(isinstance(p, ToolCallPart) for p in d.parts)


def _merge_completions(drafts: list[Draft], several_choices: bool) -> list[Draft]:
    """Completions split from one response become one assistant message again.

    Two splits are known: Anthropic's "thinking" completion before its answer, and one
    completion per parallel tool call (Koog). The second is only undone when the request did
    not ask for several choices and every later completion is tool calls alone, with a
    tool-call (or no) finish reason on both sides: real separate choices rarely look so.
    """
    out: list[Draft] = []
    for d in drafts:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.role == "assistant"
            and d.role == "assistant"
            and (
                (prev.thinking and not d.thinking)
                or (
                    not several_choices
                    and _tool_calls_only(d)
                    and prev.finish_reason in (None, "tool_call")
                    and d.finish_reason in (None, "tool_call")
                )
            )
        ):
            out[-1] = Draft(
                "assistant", [*prev.parts, *d.parts], d.finish_reason or prev.finish_reason
            )
        else:
            out.append(d)
    return out


def _tools(groups: dict[int, Fields], deg: Degradations) -> list[ToolDefinition]:
    out: list[ToolDefinition] = []
    for _, f in by_index(groups):
        params = f.get("parameters", f.get("input_schema"))
        tool = tool_definition(
            {"name": f.get("name"), "description": f.get("description"), "parameters": params},
            deg,
        )
        if tool is not None:
            out.append(tool)
    return out


def _span_finish_reasons(attrs: dict[str, Any]) -> list[str | None]:
    return [finish_reason(x) for x in finish_reasons(attrs.get("gen_ai.response.finish_reasons"))]


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's messages and tools if the span carries OpenLLMetry content, else None."""
    groups = group_indexed(attrs, (*_PROMPTS, *_COMPLETIONS, _FUNCTIONS))
    prompts = _pick(groups, _PROMPTS)
    completions = _pick(groups, _COMPLETIONS)
    whole = {k: attrs.get(k) for k in ("gen_ai.prompt", "gen_ai.completion")}
    for e in events if isinstance(events, list) else []:
        name = e.get("name") if isinstance(e, dict) else None
        key = _EVENT_KEYS.get(name) if isinstance(name, str) else None
        ea = e.get("attributes") if key else None
        if key and isinstance(ea, dict) and whole[key] is None:
            whole[key] = ea.get(key)
    if not prompts and not completions and all(v is None for v in whole.values()):
        return None

    ctx = Ctx(deg, seed, attrs)
    if prompts:
        inputs = [_flat_draft(ctx, f, "user", ("in", n)) for n, f in prompts]
    elif whole["gen_ai.prompt"] is not None:
        inputs = _whole(ctx, whole["gen_ai.prompt"], "user", "in")
    else:
        inputs = []
    if completions:
        outputs = [_flat_draft(ctx, f, "assistant", ("out", n)) for n, f in completions]
    elif whole["gen_ai.completion"] is not None:
        outputs = _whole(ctx, whole["gen_ai.completion"], "assistant", "out")
    else:
        outputs = []

    n = as_int(attrs.get("gen_ai.request.choice.count"))
    pairer = Pairer(ctx)
    input_messages = merge_assistant_runs(pairer.messages(inputs))
    output_messages = pairer.messages(
        _merge_completions(outputs, several_choices=bool(n and n > 1)), output=True
    )
    return Content(
        source=SOURCE,
        input_messages=input_messages,
        output_messages=fill_finish(output_messages, _span_finish_reasons(attrs)),
        tools=_tools(groups[_FUNCTIONS], deg),
    )
