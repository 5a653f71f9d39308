"""OpenInference span attributes to canonical content (docs/sources/openllmetry-openinference.md).

Messages are flattened into ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``
(role, content, contents.M.message_content.*, tool_calls.M.tool_call.*, tool_call_id, name) and
tools into ``llm.tools.N.tool.json_schema``. The attributes are the source of the messages;
``input.value`` / ``output.value`` (the raw request and response bodies) only fill in what the
attributes cannot say: the finish reason, ids of tool calls recorded without one, and which
Responses-API items were reasoning.
"""

from __future__ import annotations

from typing import Any

from lithify.core.values import as_int
from lithify.model import (
    Part,
    ReasoningPart,
    ServerToolCallPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
)
from lithify.translate._common import (
    SYNTHESIZED,
    Degradations,
    blob_part,
    file_part,
    finish_reason,
    modality_of,
    tool_definition,
)
from lithify.translate._flat import (
    Ctx,
    Draft,
    Fields,
    Pairer,
    Piece,
    by_index,
    content_pieces,
    fill_finish,
    group_indexed,
    ident,
    loads,
    merge_assistant_runs,
    message_draft,
    norm_role,
    sub_indexed,
    tool_call,
)
from lithify.translate._telemetry import Content, uri_media
from lithify.translate.openai_common import filename_mime

SOURCE = "openinference"

_IN = "llm.input_messages."
_OUT = "llm.output_messages."
_TOOLS = "llm.tools."
_PROMPTS = "llm.prompts."
_CHOICES = "llm.choices."
_OPAQUE_KEYS = ("signature", "data", "encrypted_content")
# What the instrumentation writes in place of media it hides (OPENINFERENCE_HIDE_INPUT_IMAGES)
# or of a base64 image longer than OPENINFERENCE_BASE64_IMAGE_MAX_LENGTH.
_HIDDEN = "__REDACTED__"
_MEDIA_KINDS = ("image", "audio", "video", "document", "file")
_MODAL_KINDS = frozenset({"image", "audio", "video"})  # the others: modality from the MIME type


def _strip(fields: Fields) -> Fields:
    return {k.removeprefix("message."): v for k, v in fields.items()}


def _contents(ctx: Ctx, f: Fields, position: tuple[Any, ...]) -> list[Piece]:
    out: list[Piece] = []
    for j, c in sub_indexed(f, "contents.", strip="message_content."):
        kind, text = c.get("type"), c.get("text")
        if kind is None and not isinstance(text, str):
            # No type recorded: the item's own keys say which medium it holds.
            kind = next((k for k in _MEDIA_KINDS if any(x.startswith(f"{k}.") for x in c)), None)
        opaque = any(c.get(k) for k in _OPAQUE_KEYS)
        if opaque:
            ctx.deg.add("opaque_reasoning")
        if kind == "reasoning":
            if isinstance(text, str) and text:
                out.append(ReasoningPart(text))
        elif kind in (None, "text") and (text is None or isinstance(text, str)):
            if text:
                out.append(TextPart(text))
            elif kind is None and not opaque and any(v is not None for v in c.values()):
                ctx.deg.add("unsupported_content")  # an untyped item holding no known content
        elif kind in _MEDIA_KINDS:
            media = _media(c, kind, ctx.deg)
            if media is not None:
                out.append(media)
        elif kind == "tool_use" and _str(c.get("tool_call.function.name")) is not None:
            # A tool call kept in its place among ordered parts, with the tool_call.* suffixes
            # (the spec has the same call in message.tool_calls too: _draft keeps one).
            call = tool_call(
                ctx,
                c.get("tool_call.id"),
                c.get("tool_call.function.name"),
                c.get("tool_call.function.arguments"),
                *position,
                "contents",
                j,
            )
            if call is not None:
                out.append(call)
        else:
            # A content type the convention does not define, or a tool_use naming no tool.
            ctx.deg.add("unsupported_content")
    return out


def _unordered(
    contents: list[Piece], calls: list[ToolCallPart | ServerToolCallPart]
) -> list[ToolCallPart | ServerToolCallPart]:
    """The calls of ``tool_calls`` that the ordered contents do not hold already: the same
    call is in both (the spec's ordered tool_use parts). Matched by id, or, where the source
    gave none (a synthesized id differs by place), by name and arguments, each once."""
    left = list(calls)
    for p in contents:
        if not isinstance(p, ToolCallPart):
            continue
        for i, c in enumerate(left):
            same_id = c.id == p.id
            synthesized = p.id.startswith(SYNTHESIZED) and isinstance(c, ToolCallPart)
            if same_id or (synthesized and (c.name, c.arguments) == (p.name, p.arguments)):
                del left[i]
                break
    return left


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _media(c: Fields, kind: str, deg: Degradations) -> Part | None:
    """``message_content.{image.image.url | audio.audio.{url, mime_type} | video.video.url |
    document.document.{url, id, content, mime_type} | file.file.{url, id, mime_type, name}}``:
    a data URL is inline bytes (a blob), any other URL a uri part, a document or file id a file
    part, a document's inline text a text/plain blob. Media the instrumentation hid, or left
    without data, counts ``malformed_media``."""
    pre = f"{kind}.{kind}."
    url = _str(c.get(pre + "url"))
    mime = _str(c.get(pre + "mime_type"))
    if mime is None and not (url or "").startswith("data:"):
        mime = filename_mime(c.get(pre + "name"))  # as a file input's name implies it
    modality = kind if kind in _MODAL_KINDS else modality_of(mime)
    if url is not None and url != _HIDDEN:
        return uri_media(url, mime, deg, modality)
    if kind in ("document", "file") and (file_id := _str(c.get(pre + "id"))) is not None:
        return file_part(file_id, mime, deg, modality)
    text = _str(c.get(pre + "content"))
    if kind == "document" and text is not None and text != _HIDDEN:
        return blob_part(text.encode(), mime or "text/plain", deg, "document")
    deg.add("malformed_media")
    return None


def _draft(ctx: Ctx, raw: Fields, default_role: str, position: tuple[Any, ...]) -> Draft:
    f = _strip(raw)
    calls: list[ToolCallPart | ServerToolCallPart] = []
    for m, tc in sub_indexed(f, "tool_calls.", strip="tool_call."):
        call = tool_call(
            ctx,
            tc.get("id"),
            tc.get("function.name"),
            tc.get("function.arguments"),
            *position,
            "call",
            m,
        )
        if call is not None:
            calls.append(call)
    if f.get("function_call_name") is not None:
        call = tool_call(
            ctx,
            None,
            f.get("function_call_name"),
            f.get("function_call_arguments_json"),
            *position,
            "function_call",
        )
        if call is not None:
            calls.append(call)
    role = f.get("role")
    content = f.get("content")
    contents = _contents(ctx, f, position)
    calls = _unordered(contents, calls)
    r = norm_role(role, default_role)
    after: list[Piece] = []
    if r == "tool" or (ident(f.get("tool_call_id")) is not None and r != "assistant"):
        # The result is `content`, else the text contents. Media the tool returned follow it
        # (docs/canonical.md, Parts beyond v1); any other content is the rest of the message,
        # split off after the result as a source message mixing both is.
        said = [p.content for p in contents if isinstance(p, TextPart)]
        from_contents = content is None and bool(said)
        if from_contents:
            content = said[0] if len(said) == 1 else [{"type": "text", "text": t} for t in said]
        before: list[Piece] = []
        after = [
            p
            for p in contents
            if not (isinstance(p, TextPart) and (from_contents or p.content == content))
        ]
    else:
        # The flattening loses the order of content and contents: the plain content first,
        # unless contents already carries the same text.
        first = content_pieces(ctx, content, False, *position, "content")
        texts = {p.content for p in contents if isinstance(p, TextPart)}
        before = [p for p in first if not (isinstance(p, TextPart) and p.content in texts)]
        before += contents
        content = None
    return message_draft(
        ctx,
        role=role,
        default_role=default_role,
        content=content,
        decode=False,
        position=position,
        tool_call_id=f.get("tool_call_id"),
        name=f.get("name"),
        before=before,
        after=after,
        calls=calls,
    )


def _json(value: Any) -> dict[str, Any] | None:
    """A JSON object attribute, serialized or already parsed; anything else is None."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = loads(value)
    return value if isinstance(value, dict) else None


def _items(doc: Any, key: str) -> list[Any]:
    v = doc.get(key) if isinstance(doc, dict) else None
    return v if isinstance(v, list) else []


def _add_id(out: list[tuple[str, str]], name: Any, call_id: Any) -> None:
    cid = ident(call_id)
    if isinstance(name, str) and cid is not None:
        out.append((name, cid))


def _raw_tool_ids(doc: Any) -> list[tuple[str, str]]:
    """(name, id) of every tool call in a raw chat, Anthropic or Responses response body."""
    out: list[tuple[str, str]] = []
    for choice in _items(doc, "choices"):
        msg = choice.get("message") if isinstance(choice, dict) else None
        for tc in _items(msg, "tool_calls"):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                _add_id(out, fn.get("name"), tc.get("id"))
    for block in _items(doc, "content"):
        if isinstance(block, dict) and block.get("type") == "tool_use":
            _add_id(out, block.get("name"), block.get("id"))
    for item in _items(doc, "output"):
        if isinstance(item, dict) and item.get("type") in ("function_call", "custom_tool_call"):
            _add_id(out, item.get("name"), item.get("call_id"))
    return out


def _raw_finish(doc: Any) -> list[str | None]:
    """Finish reasons from a raw response body, one per choice."""
    if not isinstance(doc, dict):
        return []
    choices = _items(doc, "choices")
    if choices:
        return [
            finish_reason(c.get("finish_reason")) if isinstance(c, dict) else None for c in choices
        ]
    if doc.get("stop_reason") is not None:
        return [finish_reason(doc.get("stop_reason"))]
    status = doc.get("status")
    if doc.get("object") == "response" and isinstance(status, str):
        if status == "completed":
            calls = any(
                isinstance(i, dict) and i.get("type") == "function_call"
                for i in _items(doc, "output")
            )
            return ["tool_call" if calls else "stop"]
        if status == "incomplete":
            details = doc.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            return ["length" if reason == "max_output_tokens" else "content_filter"]
        if status == "failed":
            return ["error"]
        return []
    if isinstance(doc.get("finish_reason"), str):
        return [finish_reason(doc["finish_reason"])]
    return []


def _reasoning_items(
    ctx: Ctx, drafts: list[tuple[int, Draft]], items: list[Any], offsets: tuple[int, ...]
) -> None:
    """Responses reasoning summaries are recorded as plain text contents of an assistant
    message; the raw body at the same position says which ones were reasoning. A message is
    relabelled only when its texts are exactly the item's summary texts."""
    for n, d in drafts:
        if d.role != "assistant" or not all(isinstance(p, TextPart) for p in d.parts):
            continue
        texts = [p.content for p in d.parts if isinstance(p, TextPart)]
        for off in offsets:
            k = n - off
            item = items[k] if 0 <= k < len(items) else None
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            summary = [s.get("text") for s in _items(item, "summary") if isinstance(s, dict)]
            if [t for t in summary if isinstance(t, str) and t] != texts:
                continue
            d.parts = [ReasoningPart(t) for t in texts]
            if item.get("encrypted_content"):
                ctx.deg.add("opaque_reasoning")
            break


def _completion_drafts(
    ctx: Ctx, attrs: dict[str, Any], groups: dict[str, dict[int, Fields]]
) -> tuple[list[Draft], list[Draft]]:
    """The completions-API form: ``llm.prompts`` (a list, or ``N.prompt.text``) and
    ``llm.choices.N.completion.text``."""
    prompts: list[Any] = []
    listed = attrs.get("llm.prompts")
    if isinstance(listed, list):
        prompts = listed
    elif isinstance(listed, str):
        decoded = loads(listed) if listed.lstrip()[:1] in ('"', "[") else None
        prompts = (
            decoded
            if isinstance(decoded, list)
            else [decoded if isinstance(decoded, str) else listed]
        )
    else:
        prompts = [f.get("prompt.text") for _, f in by_index(groups[_PROMPTS])]
    choices = [f.get("completion.text") for _, f in by_index(groups[_CHOICES])]
    ins = [
        message_draft(
            ctx, role="user", default_role="user", content=p, decode=False, position=("in", i)
        )
        for i, p in enumerate(prompts)
    ]
    outs = [
        message_draft(
            ctx,
            role="assistant",
            default_role="assistant",
            content=c,
            decode=False,
            position=("out", i),
        )
        for i, c in enumerate(choices)
    ]
    return ins, outs


def _tools(groups: dict[int, Fields], deg: Degradations) -> list[ToolDefinition]:
    out: list[ToolDefinition] = []
    for _, f in by_index(groups):
        schema = f.get("tool.json_schema")
        if schema is None:
            schema = {
                "name": f.get("tool.name"),
                "description": f.get("tool.description"),
                "parameters": f.get("tool.parameters"),
            }
        tool = tool_definition(_json(schema), deg)
        if tool is not None:
            out.append(tool)
    return out


def span_content(
    attrs: dict[str, Any], events: list[dict[str, Any]], deg: Degradations, seed: str
) -> Content | None:
    """The call's messages and tools if the span carries OpenInference content, else None."""
    groups = group_indexed(attrs, (_IN, _OUT, _TOOLS, _PROMPTS, _CHOICES))
    ctx = Ctx(deg, seed, attrs)
    if groups[_IN] or groups[_OUT]:
        ins = [(n, _draft(ctx, f, "user", ("in", n))) for n, f in by_index(groups[_IN])]
        raw_out = _json(attrs.get("output.value"))
        ctx.recoverable = _raw_tool_ids(raw_out)
        outs = [(n, _draft(ctx, f, "assistant", ("out", n))) for n, f in by_index(groups[_OUT])]
        raw_in = attrs.get("input.value")
        if isinstance(raw_in, str) and '"reasoning"' in raw_in:
            _reasoning_items(ctx, ins, _items(_json(raw_in), "input"), (1, 0))
        _reasoning_items(ctx, outs, _items(raw_out, "output"), (0,))
        in_drafts, out_drafts = [d for _, d in ins], [d for _, d in outs]
    elif attrs.get("llm.prompts") is not None or groups[_PROMPTS] or groups[_CHOICES]:
        raw_out = _json(attrs.get("output.value"))
        in_drafts, out_drafts = _completion_drafts(ctx, attrs, groups)
    else:
        return None

    inv = _json(attrs.get("llm.invocation_parameters"))
    n = as_int(inv.get("n")) if isinstance(inv, dict) else None
    several = bool(n and n > 1) or len(_items(raw_out, "choices")) > 1
    pairer = Pairer(ctx)
    input_messages = merge_assistant_runs(pairer.messages(in_drafts))
    output_messages = pairer.messages(out_drafts, output=True)
    if not several:
        # OpenInference splits one Responses answer into one message per output item.
        output_messages = merge_assistant_runs(output_messages)
    own = attrs.get("llm.finish_reason")
    reasons = [finish_reason(own)] if isinstance(own, str) and own else _raw_finish(raw_out)
    return Content(
        source=SOURCE,
        input_messages=input_messages,
        output_messages=fill_finish(output_messages, reasons),
        tools=_tools(groups[_TOOLS], deg),
    )
