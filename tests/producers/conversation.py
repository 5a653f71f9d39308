"""The weather-agent conversation every producer and the provider-SDK tests script: its words,
tool and results. Standard library only, so that lithify's own tests (tests/test_provider_sdks.py,
tests/test_vercel_ai.py) and the producer venvs (through common.py) read the same one."""

from __future__ import annotations

from typing import Any

SYSTEM = "You are a weather assistant. Call get_weather once per city, then answer briefly."
USER = "What's the weather in Paris and in Zürich right now?"
TOOL_NAME = "get_weather"
TOOL_DESCRIPTION = "Current weather for one city."
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
# One result a JSON string, one plain text: a tool result must stay the string the model saw.
RESULTS = {
    "Paris": '{"temperature": 18, "unit": "celsius", "conditions": "cloudy"}',
    "Zürich": "12 °C, light rain",
}
