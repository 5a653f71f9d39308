"""Runs inside .venv-consumers-nemo-gym (Python 3.12, nemo-gym 0.4.0): NeMo Gym's own code reads
lithify's native rows. Reports what NeMo Gym made of each row; tests/consumers/test_nemo_gym.py
judges it.

Usage: ``python run_nemo_gym.py MANIFEST.json OUT.json``. The manifest maps an id to a JSONL file
(``{"files": {id: path}}``); for every line the report holds:

- ``error``: NeMo Gym's validation error for ``responses_create_params``, else null;
- ``dump``: ``NeMoGymResponseCreateParamsNonStreaming.model_validate(params)
  .model_dump(mode="json", exclude_unset=True)``, what NeMo Gym holds after reading the row;
- ``run_request``: the error of ``BaseRunRequest.model_validate(line)`` (the whole line, as a
  resources server receives it), else null;
- ``prepare_invalid``: what NeMo Gym's data preparation (``compute_sample_metrics``, behind
  ``ng_prepare_data``) says of the raw line: true when it would count it as invalid;
- ``chat``: the Chat Completions request NeMo Gym's vLLM model server sends for the row
  (``VLLMConverter.responses_to_chat_completion_create_params``), or ``chat_error``;
- ``trajectory_error`` / ``trajectory_dump``: the same model and dump for the whole trajectory
  (``input`` followed by lithify's ``recorded_output``), as one would replay it, and
  ``trajectory_chat``: the Chat Completions request of that trajectory (or
  ``trajectory_chat_error``).
"""

from __future__ import annotations

import json
import sys
import traceback
from importlib.metadata import version
from typing import Any

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.responses_converter import VLLMConverter
from nemo_gym.train_data_utils import compute_sample_metrics
from pydantic import BaseModel, ValidationError


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def check_line(line: str) -> dict[str, Any]:
    row = json.loads(line)
    out: dict[str, Any] = {"error": None, "dump": None, "run_request": None}
    try:
        params = NeMoGymResponseCreateParamsNonStreaming.model_validate(
            row["responses_create_params"]
        )
        out["dump"] = params.model_dump(mode="json", exclude_unset=True)
    except ValidationError as e:
        out["error"] = str(e)
        params = None
    trajectory = {
        **row["responses_create_params"],
        "input": row["responses_create_params"]["input"] + row.get("recorded_output", []),
    }
    out["trajectory_error"] = out["trajectory_dump"] = None
    try:
        model = NeMoGymResponseCreateParamsNonStreaming.model_validate(trajectory)
        out["trajectory_dump"] = model.model_dump(mode="json", exclude_unset=True)
    except ValidationError as e:
        out["trajectory_error"] = str(e)
    else:
        try:
            converter = VLLMConverter(return_token_id_information=False, uses_reasoning_parser=True)
            chat = converter.responses_to_chat_completion_create_params(model)
            out["trajectory_chat"] = _jsonable(chat)
        except Exception:  # NeMo Gym converts no input_file, e.g.
            out["trajectory_chat_error"] = traceback.format_exc(limit=4)
    try:
        BaseRunRequest.model_validate(row)
    except ValidationError as e:
        out["run_request"] = str(e)
    _, out["prepare_invalid"] = compute_sample_metrics(line)
    if params is not None:
        try:
            converter = VLLMConverter(return_token_id_information=False, uses_reasoning_parser=True)
            chat = converter.responses_to_chat_completion_create_params(params)
            out["chat"] = _jsonable(chat)
        except Exception:
            out["chat_error"] = traceback.format_exc(limit=4)
    return out


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    report: dict[str, Any] = {
        "versions": {p: version(p) for p in ("nemo-gym", "pydantic", "openai")},
        "python": sys.version.split()[0],
        "files": {},
    }
    for key, path in manifest["files"].items():
        with open(path, encoding="utf-8") as f:
            report["files"][key] = [check_line(line) for line in f if line.strip()]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
