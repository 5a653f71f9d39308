"""Which API a ``messages`` request is written for: Chat Completions or Anthropic Messages.

Both send ``model``, ``messages`` and ``max_tokens``, so one rule decides for both translators:
no request is claimed by both, and every request with ``messages`` (and not also Gemini's
``contents`` or Responses' ``input``) by one. Anything only Chat sends makes it Chat; otherwise
anything only Anthropic sends makes it Anthropic; otherwise it is Chat, which most servers speak.
"""

from __future__ import annotations

from typing import Any, Literal

from lithify.translate.openai_common import field, is_thinking_chunk

# Request keys Chat Completions (and the servers compatible with it) takes and the Messages API
# refuses. They serve to tell the two formats apart, nothing else: the parameters a fact keeps
# are openai_common's. `stop` (Anthropic: `stop_sequences`), `user` (Anthropic:
# `metadata.user_id`) and `audio` are as much Chat's as the rest.
CHAT_ONLY_KEYS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "stop",
        "stream_options",
        "top_logprobs",
        "user",
    }
)
# `system` is no longer one: the Messages API takes system messages among `messages` too
# (anthropic 2.16's SystemMessageParam), so a system turn beside Anthropic's blocks is Anthropic.
_CHAT_ONLY_ROLES = frozenset({"developer", "tool", "function"})
_CHAT_ONLY_MESSAGE_KEYS = ("tool_calls", "function_call", "tool_call_id", "reasoning_content")
_CHAT_ONLY_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})

_ANTHROPIC_KEYS = ("system", "stop_sequences", "anthropic_version", "anthropic_beta")
# Block types only the Messages API uses (`image` too, once Chat's parts are ruled out).
_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "image",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "compaction",
    }
)


def messages_format(doc: Any) -> Literal["openai-chat", "anthropic"] | None:
    """``openai-chat`` or ``anthropic`` for a request with a ``messages`` list, else None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return None
    if "contents" in doc or "input" in doc:
        return None
    messages = [m for m in doc["messages"] if isinstance(m, dict)]
    blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]
    tools = doc.get("tools") if isinstance(doc.get("tools"), list) else []
    tools = [t for t in tools if isinstance(t, dict)]
    if (
        any(k in doc for k in CHAT_ONLY_KEYS)
        or any(
            field(m, "role") in _CHAT_ONLY_ROLES or any(k in m for k in _CHAT_ONLY_MESSAGE_KEYS)
            for m in messages
        )
        or any(field(b) in _CHAT_ONLY_PARTS or is_thinking_chunk(b) for b in blocks)
        or any(isinstance(t.get("function"), dict) for t in tools)
    ):
        return "openai-chat"
    thinking = doc.get("thinking")
    model = doc.get("model")
    if (
        any(k in doc for k in _ANTHROPIC_KEYS)
        or any(field(b) in _ANTHROPIC_BLOCKS for b in blocks)
        or (isinstance(thinking, dict) and "budget_tokens" in thinking)
        or any("input_schema" in t and "function" not in t for t in tools)
        or (isinstance(model, str) and model.startswith("claude") and "max_tokens" in doc)
    ):
        return "anthropic"
    return "openai-chat"
