"""Profiles: the same rows in the shape each trainer reads (docs/export.md, Profiles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lithify.export.trainer import arguments_text

KINDS = ("sft", "nemo-gym", "dpo", "rl")
PROFILES = ("canonical", "trl", "openai", "axolotl", "nemo-gym")
REASONING_KEYS = ("thinking", "reasoning_content")
ARGUMENTS = ("object", "string")

# Which profiles each row kind has a shape for.
SUPPORTED: dict[str, tuple[str, ...]] = {
    "sft": ("canonical", "trl", "openai", "axolotl"),
    "nemo-gym": ("canonical", "nemo-gym"),
    "dpo": ("canonical", "trl", "openai"),
    "rl": ("canonical", "trl", "nemo-gym"),
}

# What a profile changed in a row because its target has no place for it: counted, never silent.
PROFILE_CHANGES: dict[str, str] = {
    "reasoning_dropped": "assistant reasoning left out: the profile's format has no reasoning "
    "field (an earlier assistant turn that only reasoned is left out whole)",
    "tool_media_as_user": "media a tool returned (a computer-use screenshot) put in a user "
    "message right after the tool's result: the format's tool messages hold text only",
}


# Profiles whose rows are rendered by chat templates.
TEMPLATE_PROFILES = ("trl", "axolotl")


class ProfileError(ValueError):
    """Options that do not fit together (a usage error)."""


@dataclass(frozen=True)
class Profile:
    name: str
    reasoning_key: str | None  # None: the format has no reasoning field (reasoning is dropped)
    arguments: Literal["object", "string"]
    tool_result_name: bool  # tool messages carry the function name
    weights: bool  # assistant messages carry weight 0/1 (context/target)
    # TRL vision rows (--images): every content a list of text and image entries, and an
    # ``images`` column (docs/export.md, Media and server tools).
    images: bool = False

    @property
    def media_mode(self) -> str:
        """What media parts become in this profile's rows (``export.media.MEDIA_MODES``)."""
        if self.images:
            return "images"
        if self.name == "openai":
            return "openai"
        if self.name == "nemo-gym":
            return "responses"
        return "none"

    @property
    def canonical_messages(self) -> bool:
        """Messages exactly as the canonical trainer schemas define them."""
        return (
            self.reasoning_key == "thinking"
            and self.arguments == "object"
            and self.tool_result_name
            and not self.weights
            and not self.images
        )

    def tag(self) -> str:
        """A short name of the message shape, part of the row schema id."""
        reasoning = self.reasoning_key or "none"
        tag = f"{self.name}.{reasoning}.{self.arguments}"
        return f"{tag}.images" if self.images else tag

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Canonical trainer messages (fresh dicts) reshaped in place for this profile.

        Reasoning the profile has no field for is removed, and with it an assistant message
        that held nothing else; the caller counts it beforehand (``reasoning_dropped``).
        """
        if self.canonical_messages:
            return messages
        kept: list[dict[str, Any]] = []
        for m in messages:
            role = m["role"]
            if role == "assistant":
                if "thinking" in m:
                    thinking = m.pop("thinking")
                    if self.reasoning_key is not None:
                        # Keep the key before content, as in the canonical form.
                        rest = {k: m.pop(k) for k in list(m) if k != "role"}
                        m[self.reasoning_key] = thinking
                        m.update(rest)
                    elif len(m) == 1:
                        continue  # only its role is left: no message the format can hold
                if self.name in TEMPLATE_PROFILES:
                    # Chat templates (DeepSeek-V3, …) read message["content"] unconditionally.
                    m.setdefault("content", [] if self.images else "")
                if self.arguments == "string":
                    for c in m.get("tool_calls", ()):
                        fn = c["function"]
                        fn["arguments"] = arguments_text(fn["arguments"])
            elif role == "tool" and not self.tool_result_name:
                del m["name"]
            kept.append(m)
        return kept


def resolve(
    kind: str,
    name: str,
    *,
    reasoning_key: str | None = None,
    arguments: str | None = None,
    images: bool = False,
) -> Profile:
    """The profile ``name`` for row kind ``kind``, with the overrides the user gave."""
    if kind not in KINDS:
        raise ProfileError(f"unknown row kind {kind!r}: choose one of {', '.join(KINDS)}")
    if name not in PROFILES:
        raise ProfileError(f"unknown profile {name!r}: choose one of {', '.join(PROFILES)}")
    if name not in SUPPORTED[kind]:
        raise ProfileError(
            f"{kind} rows have no {name} profile: choose one of {', '.join(SUPPORTED[kind])}"
        )
    if reasoning_key is not None and reasoning_key not in REASONING_KEYS:
        raise ProfileError(f"--reasoning-key must be one of {', '.join(REASONING_KEYS)}")
    if arguments is not None and arguments not in ARGUMENTS:
        raise ProfileError(f"--arguments must be one of {', '.join(ARGUMENTS)}")
    if images and (kind, name) != ("sft", "trl"):
        raise ProfileError("--images makes TRL vision SFT rows: it needs sft --profile trl")
    if name == "openai":
        # OpenAI fine-tuning: arguments as JSON strings, no reasoning field, no tool names.
        if reasoning_key is not None:
            raise ProfileError("the openai profile has no reasoning field: drop --reasoning-key")
        if arguments == "object":
            raise ProfileError("the openai profile needs --arguments string")
        return Profile("openai", None, "string", False, kind == "sft")
    if name == "nemo-gym":
        # Responses items: arguments are JSON strings and reasoning is a reasoning item.
        if reasoning_key is not None or arguments is not None:
            raise ProfileError(
                "the nemo-gym profile writes Responses items: --reasoning-key and --arguments "
                "do not apply"
            )
        return Profile("nemo-gym", "thinking", "string", True, False)
    default_key = "thinking" if name == "canonical" else "reasoning_content"
    return Profile(
        name,
        reasoning_key or default_key,
        "string" if arguments == "string" else "object",
        True,
        False,
        images,
    )
