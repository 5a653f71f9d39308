"""lithify: turn LLM agent telemetry and provider traffic into validated training data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lithify.model import (
        InferenceCall,
        Message,
        ReasoningPart,
        Skip,
        TextPart,
        ToolCallPart,
        ToolCallResponsePart,
        ToolDefinition,
    )

__version__ = "0.1.0"

__all__ = [
    "InferenceCall",
    "Message",
    "ReasoningPart",
    "Skip",
    "TextPart",
    "ToolCallPart",
    "ToolCallResponsePart",
    "ToolDefinition",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The model (msgspec) is imported on first use of one of its names, so that `lithify
    # --version`, which needs only __version__, does not pay for it.
    if name in __all__:
        from lithify import model

        return getattr(model, name)
    raise AttributeError(f"module 'lithify' has no attribute {name!r}")
