"""Row schemas and validation: every row is checked before it is written.

Messages refer to the canonical schemas (``lithify/schemas``) by their ``$id``; a profile whose
messages differ (another reasoning key, arguments as strings, no tool names, weights) gets a
variant derived from the canonical schema, so the rule stays written once. NeMo Gym native rows
use a schema of NeMo Gym's own ``NeMoGymResponseCreateParamsNonStreaming``.
"""

from __future__ import annotations

import copy
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema_rs
import orjson

from lithify.export.flags import FLAGS
from lithify.export.profiles import Profile
from lithify.schemas import schema as canonical_schema

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_NATIVE_FILE = "nemo-gym-response-create-params.native.json"

_MESSAGES = (
    "trainer-text-message",
    "trainer-assistant-message",
    "trainer-assistant-tool-call-message",
    "trainer-tool-message",
)


class RowInvalid(Exception):
    """A row that fails its schema: a defect in lithify, reported with the row's source ids."""

    def __init__(self, schema_id: str, source_ids: list[str], errors: list[str]) -> None:
        self.schema_id = schema_id
        self.source_ids = source_ids
        self.errors = errors
        super().__init__(
            f"row from {', '.join(source_ids)} fails {schema_id}: " + "; ".join(errors[:5])
        )

    def __reduce__(self) -> tuple[type[RowInvalid], tuple[str, list[str], list[str]]]:
        # Pickled as its fields: a worker process of the export hands it to the main one.
        return (RowInvalid, (self.schema_id, self.source_ids, self.errors))


@cache
def native_schema() -> dict[str, Any]:
    return orjson.loads(files(__package__).joinpath("schemas", _NATIVE_FILE).read_bytes())


_SURROGATE_FREE = "^[^\\u0000\\uD800-\\uDFFF]*$"


def _rust_patterns(value: Any) -> Any:
    """The schema with its "no NUL, no lone surrogate" pattern in a form Rust's regex engine
    compiles (it has no surrogate code points). Equivalent: a string holding a lone surrogate
    never reaches the validator (JSON encoding refuses it first, and the exporter counts it)."""
    if isinstance(value, dict):
        return {
            k: "^[^\\u0000]*$" if k == "pattern" and v == _SURROGATE_FREE else _rust_patterns(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rust_patterns(v) for v in value]
    return value


def _message_variant(base: str, profile: Profile) -> dict[str, Any]:
    """The canonical trainer schema ``base`` reshaped for ``profile`` (a new ``$id``)."""
    s = copy.deepcopy(canonical_schema(base))
    s["$id"] = f"{s['$id']}:{profile.tag()}"
    props = s["properties"]
    if "thinking" in props:
        thinking = props.pop("thinking")
        key = profile.reasoning_key
        if key is not None:
            props[key] = thinking
            for alt in s.get("anyOf", ()):
                alt["required"] = [key if r == "thinking" else r for r in alt["required"]]
        elif "anyOf" in s:
            # Without a reasoning field, an assistant message without tool calls needs content.
            del s["anyOf"]
            s["required"] = [*s["required"], "content"]
    if profile.arguments == "string" and "$defs" in s:
        s["$defs"]["TrainerFunctionCall"]["properties"]["arguments"] = {
            "type": "string",
            "description": "The arguments as a JSON string.",
        }
    if base == "trainer-tool-message" and not profile.tool_result_name:
        del props["name"]
        s["required"] = [r for r in s["required"] if r != "name"]
    if profile.weights and base.startswith("trainer-assistant"):
        props["weight"] = {"enum": [0, 1], "description": "1: a training target; 0: context."}
    if profile.images:
        # TRL vision rows: every content is a list of text and image entries.
        props["content"] = {"type": "array", "items": {"anyOf": [_TEXT_ENTRY, _IMAGE_ENTRY]}}
    elif profile.media_mode == "openai" and base == "trainer-text-message":
        # OpenAI fine-tuning: a user message's content may be text and image_url parts.
        entries = {"anyOf": [_TEXT_ENTRY, _IMAGE_URL_ENTRY]}
        props["content"] = {"anyOf": [props["content"], {"type": "array", "items": entries}]}
    return s


_TEXT_ENTRY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
}
_IMAGE_ENTRY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type"],
    "properties": {"type": {"const": "image"}},
}
_IMAGE_URL_ENTRY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "image_url"],
    "properties": {
        "type": {"const": "image_url"},
        "image_url": {
            "type": "object",
            "additionalProperties": False,
            "required": ["url"],
            "properties": {"url": {"type": "string", "pattern": "^(data:|https?://)"}},
        },
    },
}
# The ``images`` column of TRL vision rows: image files relative to the export folder.
IMAGES_COLUMN = {
    "type": "array",
    "items": {"type": "string", "pattern": "^images/[0-9a-f]{64}\\.[a-z0-9]+$"},
}


def _message_ids(profile: Profile) -> dict[str, str]:
    if profile.canonical_messages:
        return {b: canonical_schema(b)["$id"] for b in _MESSAGES}
    return {b: _message_variant(b, profile)["$id"] for b in _MESSAGES}


def _resources(profile: Profile) -> list[tuple[str, dict[str, Any]]]:
    docs = [
        canonical_schema("inference-message"),
        _rust_patterns(canonical_schema("nemo-gym-responses-create-params")),
    ]
    docs.append(native_schema())
    if profile.canonical_messages:
        docs.extend(canonical_schema(b) for b in _MESSAGES)
    else:
        docs.extend(_message_variant(b, profile) for b in _MESSAGES)
    return [(d["$id"], d) for d in docs]


def _ref(uri: str) -> dict[str, str]:
    return {"$ref": uri}


def _array(items: dict[str, Any], *, exactly: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items}
    if exactly is not None:
        out["minItems"] = out["maxItems"] = exactly
    return out


NESTED_TOOL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "parameters"],
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "parameters": {"type": "object"},
            },
        },
    },
}

METADATA = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "source_call_ids",
        "session_id",
        "segment_id",
        "model",
        "split",
        "schema",
        "exporter",
    ],
    "properties": {
        "source_call_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "session_id": {"type": ["string", "null"]},
        "segment_id": {"type": "string"},
        "model": {"type": ["string", "null"]},
        "split": {"enum": ["train", "eval"]},
        "schema": {"type": "string"},
        "exporter": {"type": "string"},
        "turn": {"type": "integer", "minimum": 0},
        "reward": {"type": "number"},
        "chosen_call_id": {"type": "string"},
        "rejected_call_id": {"type": "string"},
        "chosen_score": {"type": "number"},
        "rejected_score": {"type": "number"},
        "flags": {"type": "array", "items": {"enum": list(FLAGS)}, "uniqueItems": True},
        # --tokenizer: the row's length in the model's tokens, and on a row cut to fit
        # --max-tokens, how many messages of its context were left out (export.tokens).
        "tokens": {"type": "integer", "minimum": 0},
        "context_cut": {"type": "integer", "minimum": 1},
    },
}


def row_schema_id(kind: str, shape: str, profile: Profile) -> str:
    return f"urn:lithify:schemas:rows:{kind}.{shape}:v1:{profile.tag()}"


def row_schema(kind: str, shape: str, profile: Profile) -> dict[str, Any]:
    """The JSON Schema rows of ``kind`` in ``shape`` for ``profile`` must satisfy."""
    ids = _message_ids(profile)
    any_message = {"anyOf": [_ref(ids[b]) for b in _MESSAGES]}
    assistant = {
        "anyOf": [
            _ref(ids["trainer-assistant-message"]),
            _ref(ids["trainer-assistant-tool-call-message"]),
        ]
    }
    inference_message = _ref(canonical_schema("inference-message")["$id"])
    native = native_schema()["$id"]
    props: dict[str, Any]
    if kind == "sft" and shape == "messages":
        props = {"messages": {**_array(any_message), "minItems": 2}, "tools": _array(NESTED_TOOL)}
    elif kind in ("sft", "rl") and shape == "prompt-completion":
        completion = _array(assistant, exactly=1) if kind == "sft" else _array(any_message)
        props = {"prompt": _array(any_message), "completion": completion}
        props["tools"] = _array(NESTED_TOOL)
        if kind == "rl":
            props["reward"] = {"type": "number"}
    elif kind == "dpo" and shape == "preference":
        one = _array(assistant, exactly=1)
        props = {
            "prompt": _array(any_message),
            "chosen": one,
            "rejected": one,
            "tools": _array(NESTED_TOOL),
        }
    elif kind == "dpo" and shape == "openai-preference":
        one = _array(assistant, exactly=1)
        props = {
            "input": {
                "type": "object",
                "additionalProperties": False,
                "required": ["messages", "tools"],
                "properties": {"messages": _array(any_message), "tools": _array(NESTED_TOOL)},
            },
            "preferred_output": one,
            "non_preferred_output": one,
        }
    elif kind in ("nemo-gym", "rl") and shape == "segment":
        turn = {
            "type": "object",
            "additionalProperties": False,
            "required": ["inference_call_id", "messages", "output"],
            "properties": {
                "inference_call_id": {"type": "string"},
                "messages": _array(inference_message),
                "output": {"anyOf": [inference_message, {"type": "null"}]},
            },
        }
        props = {
            "responses_create_params": _ref(
                canonical_schema("nemo-gym-responses-create-params")["$id"]
            ),
            "tools": _array(NESTED_TOOL),
            "turns": {**_array(turn), "minItems": 1},
            "reward": {"type": "number"},
        }
    elif kind in ("nemo-gym", "rl") and shape == "native":
        props = {
            "responses_create_params": _ref(native),
            "recorded_output": _array(_ref(f"{native}#/$defs/InputItem")),
        }
    else:
        raise ValueError(f"no {shape} shape for {kind} rows")
    if profile.images:
        props["images"] = IMAGES_COLUMN
    props["metadata"] = METADATA
    required = [k for k in props if k != "reward" or kind == "rl"]
    return {
        "$schema": DRAFT,
        "$id": row_schema_id(kind, shape, profile),
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": props,
    }


# The keywords of a list property whose validity is that of each item on its own, given the
# length: such a list can be checked item by item (``RowValidator.item_valid``).
_ITEMWISE = frozenset({"type", "items", "minItems", "maxItems"})


class RowValidator:
    """Validates the rows of one export (one kind, shape and profile).

    ``check`` validates a whole row. Rows of one segment repeat their context, so a builder may
    instead check each message once as it joins the context (``item_valid``) and then the rest
    of each row (``check_rest``): the row schema's message lists constrain each item alone,
    so the row is valid exactly when both are.
    """

    def __init__(self, kind: str, shape: str, profile: Profile) -> None:
        self.schema = row_schema(kind, shape, profile)
        self.schema_id: str = self.schema["$id"]
        registry = jsonschema_rs.Registry(_resources(profile))
        self._validator = jsonschema_rs.validator_for(self.schema, registry=registry)
        self._items: dict[str, Any] = {}
        rest = copy.deepcopy(self.schema)
        for name, prop in self.schema["properties"].items():
            # Image paths are checked with the rest of the row: builders check messages and
            # tools item by item, nothing else.
            itemwise = prop.keys() <= _ITEMWISE and "items" in prop and name != "images"
            if prop.get("type") == "array" and itemwise:
                items = {"$schema": DRAFT, **prop["items"]}
                self._items[name] = jsonschema_rs.validator_for(items, registry=registry)
                rest["properties"][name].pop("items", None)  # lists may share one dict
        rest["$id"] = f"{self.schema_id}:rest"
        self._rest = jsonschema_rs.validator_for(rest, registry=registry)

    def item_valid(self, name: str, item: Any) -> bool:
        """Whether ``item`` is valid as an item of the row's list ``name`` (a message)."""
        try:
            return bool(self._items[name].is_valid(item))
        except (ValueError, TypeError, OverflowError):
            return False

    def check_rest(self, row: dict[str, Any], source_ids: list[str], items_valid: bool) -> None:
        """``check`` for a row whose lists' items (every list ``item_valid`` knows: messages,
        tools) were each checked with ``item_valid`` (``items_valid``: all were valid), and have
        not changed since; the rest of the row is checked here."""
        if items_valid:
            # The lists' lengths still count (minItems): placeholders stand for the items.
            rest = {
                k: [None] * len(v) if k in self._items and isinstance(v, list) else v
                for k, v in row.items()
            }
            try:
                if self._rest.is_valid(rest):
                    return
            except (ValueError, TypeError, OverflowError):
                pass
        self.check(row, source_ids)  # the whole schema decides, and names the errors

    def check(self, row: dict[str, Any], source_ids: list[str]) -> None:
        """Raise ``RowInvalid`` (with the row's source ids) unless ``row`` is valid."""
        try:
            if self._validator.is_valid(row):
                return
            errors = [
                f"{'/'.join(map(str, e.instance_path)) or '(row)'}: {e.message}"
                for _, e in zip(range(5), self._validator.iter_errors(row), strict=False)
            ]
        except (ValueError, TypeError, OverflowError) as e:  # a value the validator cannot read
            errors = [str(e)]
        raise RowInvalid(self.schema_id, source_ids, errors)
