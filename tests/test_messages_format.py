"""Chat Completions or Anthropic Messages: one rule tells the two `messages` requests apart."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lithify.model import InferenceCall, Skip
from lithify.translate import anthropic, openai_chat
from lithify.translate.messages_format import CHAT_ONLY_KEYS, messages_format
from lithify.translate.provider import translate_exchange

# A request Anthropic alone would send: a top-level system prompt, stop_sequences, a tool result.
ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "system": "be brief",
    "stop_sequences": ["END"],
    "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    ],
}


def test_an_anthropic_request_is_anthropic_only() -> None:
    assert anthropic.looks_like_request(ANTHROPIC_REQUEST)
    assert not openai_chat.looks_like_request(ANTHROPIC_REQUEST)


# `user`, `stop` and `audio` were Chat's for the Anthropic translator and nobody's for the Chat
# one, so such a request was claimed by neither and gave no fact.
@pytest.mark.parametrize("key", ["user", "stop", "audio"])
def test_keys_once_listed_for_one_side_only_make_a_chat_request(key: str) -> None:
    doc = {**ANTHROPIC_REQUEST, key: "x"}
    assert openai_chat.looks_like_request(doc)
    assert not anthropic.looks_like_request(doc)
    call = translate_exchange(doc, None)
    assert isinstance(call, InferenceCall) and call.source.name == "openai-chat"


@pytest.mark.parametrize("key", sorted(CHAT_ONLY_KEYS))
def test_every_chat_only_key_rules_anthropic_out(key: str) -> None:
    assert messages_format({**ANTHROPIC_REQUEST, key: 1}) == "openai-chat"


def test_a_system_message_among_anthropic_blocks_is_anthropic() -> None:
    """The Messages API takes `role: system` messages (anthropic 2.16, SystemMessageParam):
    a request with one and a tool_use / tool_result exchange is Anthropic's, its tool call and
    result read as such. Before, the system role made it Chat's, where the blocks were unknown
    parts (counted) and the tool call and its result were lost."""
    doc = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {"c": "P"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
    }
    assert messages_format(doc) == "anthropic"
    call = translate_exchange(doc, None)
    assert isinstance(call, InferenceCall) and call.source.name == "anthropic"
    assert [m.role for m in call.input_messages] == ["system", "user", "assistant", "tool"]
    assert call.degradations.get("unsupported_content") is None
    # A system message with nothing else of either API's is Chat's still: most servers speak it.
    plain = {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    }
    assert messages_format(plain) == "openai-chat"


def test_anthropic_beta_alone_is_anthropic() -> None:
    doc = {"model": "m", "anthropic_beta": ["x"], "messages": [{"role": "user", "content": "q"}]}
    assert anthropic.looks_like_request(doc) and not openai_chat.looks_like_request(doc)


def test_tags_of_other_types_do_not_break_detection() -> None:
    doc = {"model": "m", "messages": [{"role": ["user"], "content": [{"type": {"a": 1}}]}]}
    assert messages_format(doc) == "openai-chat"
    assert isinstance(translate_exchange(doc, None), InferenceCall | Skip)


# Requests mixing what each API sends, with `contents` or `input` beside `messages` sometimes.
chat_signals = [
    {"n": 2},
    {"user": "u"},
    {"stop": ["x"]},
    {"tools": [{"type": "function", "function": {"name": "f"}}]},
]
anthropic_signals = [
    {"system": "s"},
    {"anthropic_beta": ["b"]},
    {"thinking": {"type": "enabled", "budget_tokens": 5}},
    {"tools": [{"name": "f", "input_schema": {}}]},
    {"max_tokens": 5},
]
messages = st.sampled_from(
    [
        {"role": "user", "content": "q"},
        {"role": "tool", "tool_call_id": "a", "content": "r"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
        {"role": "user", "content": [{"type": "image", "source": {}}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text"}]}]},
    ]
)
requests = st.builds(
    lambda model, msgs, extras: (
        {"model": model, "messages": msgs} | {k: v for e in extras for k, v in e.items()}
    ),
    st.sampled_from(["gpt-4o", "claude-x", "m"]),
    st.lists(messages, min_size=1, max_size=4),
    st.lists(
        st.sampled_from([*chat_signals, *anthropic_signals, {"input": "q"}, {"contents": []}]),
        max_size=4,
    ),
)


@given(requests)
def test_one_translator_claims_each_request(doc: dict[str, Any]) -> None:
    claims = [anthropic.looks_like_request(doc), openai_chat.looks_like_request(doc)]
    assert sum(claims) == (0 if "input" in doc or "contents" in doc else 1)
