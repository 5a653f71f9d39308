"""lithify: turn LLM agent telemetry and provider traffic into validated training data."""

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
