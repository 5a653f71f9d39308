"""The JSON Schemas lithify's output must satisfy, shipped with the package."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema_rs
import orjson

SCHEMAS = {
    "inference-message": "inference-message.v2.json",
    "inference-message-v1": "inference-message.v1.json",
    "nemo-gym-responses-create-params": "nemo-gym-responses-create-params.v3.json",
    "nemo-gym-responses-create-params-v2": "nemo-gym-responses-create-params.v2.json",
    "trainer-text-message": "trainer-text-message.v1.json",
    "trainer-assistant-message": "trainer-assistant-message.v1.json",
    "trainer-assistant-tool-call-message": "trainer-assistant-tool-call-message.v1.json",
    "trainer-tool-message": "trainer-tool-message.v1.json",
    "otel-input-messages": "gen-ai-input-messages.json",
    "otel-output-messages": "gen-ai-output-messages.json",
}


@cache
def schema(name: str) -> dict[str, Any]:
    return orjson.loads(files(__package__).joinpath(SCHEMAS[name]).read_bytes())


@cache
def validator(name: str) -> Any:
    return jsonschema_rs.validator_for(schema(name))
