"""The consumer tests' input and runs: facts through the real ``lithify import`` and
``lithify export``, then the consumers in their own venvs (scripts/consumers-setup builds them).

Inputs: every corpus payload and shipped example, the corpus request/response files that are two
halves of one recorded exchange (as exchange documents), and the SDK sessions of sessions.py with
their feedback. They go into a fresh SQLite store with ``lithify import``; every export reads it
with ``--store``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lithify.model import encode
from tests.consumers import sessions
from tests.export.helpers import media_sessions
from tests.export.test_tokens import build_tokenizer

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "consumers"
CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "src" / "lithify" / "examples"
LITHIFY = Path(sys.executable).with_name("lithify")
SETUP = "bash scripts/consumers-setup"

# The chat template checks need every tool-call shape the corpus has, also calls whose tool
# definitions the capture did not record (dropped by default: docs/export.md, Quality flags).
UNDEFINED_TOOLS = ("--keep-flag", "undefined_tool_call")
# Token budgets (docs/export.md): counted with the tokenizers build_exports trains (nothing is
# downloaded), named in the arguments as {qwen3} (Qwen3's template) and {qwen3_vl} (Qwen3-VL's,
# for vision rows); build_exports puts their folders there.
TOKENIZERS = {
    "qwen3": ("<|im_start|>", "<think>", "</think>", "<tool_call>", "</tool_call>"),
    "qwen3_vl": ("<|im_start|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"),
}
TOKENS = ("--tokenizer", "{qwen3}")
# Export id → `lithify export` arguments (without the store and the folder).
EXPORTS: dict[str, tuple[str, ...]] = {
    "sft-canonical": ("sft", "--eval-fraction", "0.5"),
    "sft-canonical-parquet": ("sft", "--format", "parquet", "--eval-fraction", "0.5"),
    "sft-trl": ("sft", "--profile", "trl", *UNDEFINED_TOOLS),
    "sft-trl-parquet": ("sft", "--profile", "trl", *UNDEFINED_TOOLS, "--format", "parquet"),
    "sft-trl-thinking": (
        "sft",
        "--profile",
        "trl",
        "--reasoning-key",
        "thinking",
        *UNDEFINED_TOOLS,
    ),
    "sft-trl-string": ("sft", "--profile", "trl", "--arguments", "string", *UNDEFINED_TOOLS),
    "sft-trl-pc": ("sft", "--profile", "trl", "--shape", "prompt-completion"),
    "sft-openai": ("sft", "--profile", "openai"),
    "sft-axolotl": ("sft", "--profile", "axolotl"),
    "nemo-gym-canonical": ("nemo-gym",),
    "nemo-gym-canonical-parquet": ("nemo-gym", "--format", "parquet"),
    "nemo-gym-native": ("nemo-gym", "--profile", "nemo-gym", "--eval-fraction", "0.5"),
    "nemo-gym-native-parquet": (
        "nemo-gym",
        "--profile",
        "nemo-gym",
        "--format",
        "parquet",
        "--eval-fraction",
        "0.5",
    ),
    "dpo-canonical": ("dpo",),
    "dpo-trl": ("dpo", "--profile", "trl"),
    "dpo-trl-parquet": ("dpo", "--profile", "trl", "--format", "parquet"),
    "dpo-openai": ("dpo", "--profile", "openai"),
    "rl-canonical": ("rl",),
    "rl-canonical-parquet": ("rl", "--format", "parquet"),
    "rl-trl": ("rl", "--profile", "trl"),
    "rl-nemo-gym": ("rl", "--profile", "nemo-gym"),
    # TRL vision rows (docs/export.md, Media and server tools): image files beside JSONL rows,
    # image bytes in Parquet.
    "sft-trl-images": ("sft", "--profile", "trl", "--images"),
    "sft-trl-images-parquet": ("sft", "--profile", "trl", "--images", "--format", "parquet"),
    # Every kind counted (metadata.tokens on every row; the card's Token budget), JSONL and
    # Parquet; rows over the budget dropped, or SFT rows cut to fit.
    "sft-trl-tokens": ("sft", "--profile", "trl", *TOKENS, "--max-tokens", "1000", "--fit", "split"),
    "sft-trl-tokens-parquet": (
        "sft", "--profile", "trl", *TOKENS, "--max-tokens", "1000", "--fit", "split",
        "--format", "parquet",
    ),
    "sft-openai-tokens": ("sft", "--profile", "openai", *TOKENS, "--eval-fraction", "0.5"),
    "sft-trl-images-tokens": ("sft", "--profile", "trl", "--images", "--tokenizer", "{qwen3_vl}"),
    "nemo-gym-native-tokens": ("nemo-gym", "--profile", "nemo-gym", *TOKENS, "--max-tokens", "800"),
    "nemo-gym-canonical-tokens": ("nemo-gym", *TOKENS),
    "nemo-gym-canonical-tokens-parquet": ("nemo-gym", *TOKENS, "--format", "parquet"),
    "dpo-trl-tokens": ("dpo", "--profile", "trl", *TOKENS),
    "rl-canonical-tokens": ("rl", *TOKENS),
    "rl-nemo-gym-tokens": ("rl", "--profile", "nemo-gym", *TOKENS),
    "rl-nemo-gym-tokens-parquet": ("rl", "--profile", "nemo-gym", *TOKENS, "--format", "parquet"),
}  # fmt: skip
# The exports counted with a tokenizer (tests/consumers/test_tokens.py).
TOKEN_EXPORTS = tuple(k for k, args in EXPORTS.items() if "--tokenizer" in args)
# A Parquet export → the JSONL export with the same rows (same kind, profile and split).
PARQUET_TWINS = {
    "sft-canonical-parquet": "sft-canonical",
    "sft-trl-parquet": "sft-trl",
    "nemo-gym-canonical-parquet": "nemo-gym-canonical",
    "nemo-gym-native-parquet": "nemo-gym-native",
    "dpo-trl-parquet": "dpo-trl",
    "rl-canonical-parquet": "rl-canonical",
    "sft-trl-images-parquet": "sft-trl-images",
    "sft-trl-tokens-parquet": "sft-trl-tokens",
    "nemo-gym-canonical-tokens-parquet": "nemo-gym-canonical-tokens",
    "rl-nemo-gym-tokens-parquet": "rl-nemo-gym-tokens",
}
# Exports whose rows show images: datasets decodes them (run_trl.py, images).
IMAGE_EXPORTS = ("sft-trl-images", "sft-trl-images-parquet")
# Vision chat templates that ship with TRL → the export they render (test_media.py).
VISION_TEMPLATES = {"lfm2_2_5_vl": "sft-trl-images", "idefics3": "sft-trl-images"}
# Chat template (trl/chat_templates/<name>.jinja) → the export it renders, in the shape that
# template reads: Qwen3 reads `reasoning_content`, gpt-oss `thinking`; DeepSeek-V3 concatenates
# arguments, so it gets JSON strings. The first four are checked piece by piece
# (test_templates.py); the others, the rest docs/export.md (Profiles) names, for the parts every
# template shows.
TEMPLATES = {
    "qwen3": "sft-trl",
    "llama3_1": "sft-trl",
    "gptoss": "sft-trl-thinking",
    "deepseekv3": "sft-trl-string",
    "qwen3_5_think": "sft-trl",
    "glm4moe": "sft-trl",
    "nemotron_3_nano": "sft-trl",
    "lfm2_2_5": "sft-trl-thinking",
}
TRL_ROWS = ("sft-trl", "sft-trl-pc", "dpo-trl", "rl-trl")
SFT_TRAINER = {
    "sft-trl": "qwen3_training",  # assistant-only loss needs the {% generation %} markers
    "sft-trl-pc": "qwen3_training",
}
NEMO_GYM_FILES = {
    "nemo-gym-native/train": "nemo-gym-native/train.jsonl",
    "nemo-gym-native/eval": "nemo-gym-native/eval.jsonl",
    "rl-nemo-gym/train": "rl-nemo-gym/train.jsonl",
    "nemo-gym-native-tokens/train": "nemo-gym-native-tokens/train.jsonl",
    "rl-nemo-gym-tokens/train": "rl-nemo-gym-tokens/train.jsonl",
    "control/chat-style": "control-chat-style.jsonl",
    "control/no-item": "control-no-item.jsonl",
}
# Items NeMo Gym 0.4.0 has no model for, one row each: lithify skips rows that would need them
# (server_tool_unsupported, media_unsupported); the tests show NeMo Gym's validator refusing them.
NO_ITEM_ROWS = [
    {"type": "computer_call", "id": "cu_1", "call_id": "c1", "status": "completed",
     "action": {"type": "click", "button": "left", "x": 1, "y": 2}, "pending_safety_checks": []},
    {"type": "computer_call_output", "call_id": "c1",
     "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "q"}},
    {"type": "function_call_output", "call_id": "c1",
     "output": [{"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AAAA"}]},
]  # fmt: skip
# A chat-style assistant message in a NeMo Gym row: NeMo Gym reads it as a plain message and
# drops its `tool_calls` without an error (docs/export.md, Profiles). The tests use it to show that the
# unchanged-dump check catches such a row.
CHAT_STYLE_ROW = {
    "responses_create_params": {
        "input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
        ]
    }
}


@dataclass
class Consumers:
    """Everything the consumer tests read: the exports and what each consumer reported."""

    root: Path
    summaries: dict[str, dict[str, Any]]
    trl: dict[str, Any] | None = None
    trl_error: str | None = None
    nemo_gym: dict[str, Any] | None = None
    nemo_gym_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Consumers:
        """A finished run read back from its folder (LITHIFY_CONSUMERS_REUSE in conftest)."""
        result = cls(root, json.loads((root / "summaries.json").read_text()))
        for name in ("trl", "nemo-gym"):
            report = root / f"{name}.report.json"
            data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
            error = None if data else f"{report} is missing"
            if name == "trl":
                result.trl, result.trl_error = data, error
            else:
                result.nemo_gym, result.nemo_gym_error = data, error
        return result

    def folder(self, export: str) -> Path:
        return self.root / "exports" / export

    def rows(self, export: str, split: str = "train") -> list[dict[str, Any]]:
        """The rows of a JSONL export, as written."""
        path = self.folder(export) / f"{split}.jsonl"
        text = path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.split("\n") if line]  # not at U+2028


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without settings that would change what lithify or a consumer does
    (lithify's own options, Hugging Face endpoints and caches, proxies)."""
    drop = ("LITHIFY_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "PYTHONPATH")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop) and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


def _run(cmd: list[str], what: str, timeout: float = 300, **kw: Any) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what}: `{' '.join(map(str, cmd))}` exited {proc.returncode}\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    return proc.stdout


def corpus_pairs() -> list[tuple[Path, Path]]:
    """Corpus files that are the request and the response of one recorded exchange."""
    pairs = []
    for req in sorted(CORPUS.rglob("*.request.json")):
        stem = req.name.removesuffix(".request.json")
        for ext in (".response.json", ".response.sse"):
            resp = req.with_name(stem + ext)
            if resp.exists():
                pairs.append((req, resp))
    return pairs


def corpus_singles(paired: set[Path]) -> list[Path]:
    """Every other corpus payload (NeMo Gym rows are lithify's output format, not input)."""
    return sorted(
        p
        for p in CORPUS.rglob("*")
        if p.is_file()
        and p.name != "SOURCES.md"
        and p.parent.name != "nemo-gym"
        and p not in paired
    )


def write_pairs(path: Path) -> list[tuple[Path, Path]]:
    pairs = corpus_pairs()
    lines = []
    for req, resp in pairs:
        body = resp.read_text(encoding="utf-8")
        doc = {
            "request": json.loads(req.read_text(encoding="utf-8")),
            "response": json.loads(body) if resp.suffix == ".json" else body,
        }
        lines.append(json.dumps(doc, ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return pairs


def build_exports(root: Path) -> dict[str, dict[str, Any]]:
    """Record the sessions, import everything into a fresh store, run every export."""
    inputs = root / "inputs"
    inputs.mkdir(parents=True)
    exchanges, feedback = sessions.record(inputs)
    pairs = write_pairs(inputs / "corpus-pairs.jsonl")
    paired = {p for pair in pairs for p in pair}
    store = f"sqlite:///{root / 'facts.db'}"
    env = clean_env()
    # Whole exchanges first: the store keeps the first capture of a provider response id, and the
    # response halves alone would otherwise be the ones kept.
    media = inputs / "media-facts.jsonl"  # images, a screenshot, a web search, references
    media.write_bytes(b"".join(encode(f) + b"\n" for f in media_sessions()))
    files = [inputs / "corpus-pairs.jsonl", exchanges, feedback, media]
    files += corpus_singles(paired) + sorted(EXAMPLES.iterdir())
    out = _run(
        [str(LITHIFY), "import", "--store", store, "--json", "--no-progress", *map(str, files)],
        "lithify import",
        env=env,
        cwd=root,
    )
    (root / "import.json").write_text(out)
    tokenizers = {
        name: str(build_tokenizer(name, root / "tokenizers" / name, added))
        for name, added in TOKENIZERS.items()
    }

    def export(key: str) -> tuple[str, dict[str, Any]]:
        folder = root / "exports" / key
        args = [a.format(**tokenizers) if a.startswith("{") else a for a in EXPORTS[key]]
        out = _run(
            [str(LITHIFY), "export", *args, "--store", store, "-o", str(folder), "--json"],
            f"lithify export ({key})",
            env=env,
            cwd=root,
        )
        return key, json.loads(out)

    with ThreadPoolExecutor(max_workers=4) as pool:
        summaries = dict(pool.map(export, EXPORTS))
    (root / "summaries.json").write_text(json.dumps(summaries, indent=1))
    (root / "exports" / "control-chat-style.jsonl").write_text(json.dumps(CHAT_STYLE_ROW) + "\n")
    (root / "exports" / "control-no-item.jsonl").write_text(
        "".join(
            json.dumps({"responses_create_params": {"input": [i]}}) + "\n" for i in NO_ITEM_ROWS
        )
    )
    return summaries


def consumer_python(name: str) -> Path:
    return ROOT / f".venv-consumers-{name}" / "bin" / "python"


def _missing(name: str) -> str | None:
    python = consumer_python(name)
    stamp = python.parent.parent / ".lithify-stamp"
    if python.exists() and stamp.exists():
        return None
    return (
        f"consumer venv .venv-consumers-{name} is missing or unfinished: run `{SETUP}` "
        "(scripts/test does it for you)"
    )


def trl_manifest(root: Path, summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ex = root / "exports"
    loads: dict[str, Any] = {}
    for key, summary in summaries.items():
        fmt = summary["format"]
        ext = "jsonl" if fmt == "jsonl" else "parquet"
        files = {"train": str(ex / key / f"train.{ext}")}
        if summary["rows"].get("eval"):
            files["eval"] = str(ex / key / f"eval.{ext}")
        loads[key] = {"builder": "json" if fmt == "jsonl" else "parquet", "data_files": files}
    return {
        "datasets": loads,
        "folders": {key: str(ex / key) for key in summaries},
        "trl": {k: str(ex / k / "train.jsonl") for k in TRL_ROWS},
        "templates": {
            t: str(ex / k / "train.jsonl") for t, k in {**TEMPLATES, **VISION_TEMPLATES}.items()
        },
        # The folder, and the JSONL export whose image files are the originals.
        "images": {
            k: {"folder": str(ex / k), "originals": str(ex / IMAGE_EXPORTS[0])}
            for k in IMAGE_EXPORTS
        },
        "sft_trainer": {
            k: {"path": str(ex / k / "train.jsonl"), "template": t} for k, t in SFT_TRAINER.items()
        },
    }


def run_consumers(root: Path, result: Consumers) -> None:
    """Both consumer venvs at once (one core each); a missing venv or a crash is recorded as
    that consumer's error, so its tests fail with it and the other consumer's still run."""
    manifests = {
        "trl": trl_manifest(root, result.summaries),
        "nemo-gym": {"files": {k: str(root / "exports" / p) for k, p in NEMO_GYM_FILES.items()}},
    }
    procs: dict[str, tuple[subprocess.Popen[str], Path, float]] = {}
    errors: dict[str, str | None] = {}
    for name, script in (("trl", "run_trl.py"), ("nemo-gym", "run_nemo_gym.py")):
        errors[name] = _missing(name)
        if errors[name]:
            continue
        manifest, report = root / f"{name}.manifest.json", root / f"{name}.report.json"
        manifest.write_text(json.dumps(manifests[name], indent=1))
        env = clean_env(
            HF_HOME=str(root / "hf-home"),
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            TOKENIZERS_PARALLELISM="false",
            # datasets' progress bars would fill the captured output.
            HF_DATASETS_DISABLE_PROGRESS_BARS="1",
            TQDM_DISABLE="1",
        )
        cmd = [str(consumer_python(name)), str(HERE / script), str(manifest), str(report)]
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        procs[name] = (proc, report, time.monotonic())
    for name, (proc, report, started) in procs.items():
        try:
            output, _ = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            errors[name] = f"{name} consumer ran for over 600 s\n{output[-4000:]}"
            continue
        result.timings[name] = time.monotonic() - started
        if proc.returncode != 0 or not report.exists():
            errors[name] = f"{name} consumer exited {proc.returncode}\n{output[-8000:]}"
        else:
            data = json.loads(report.read_text(encoding="utf-8"))
            if name == "trl":
                result.trl = data
            else:
                result.nemo_gym = data
    result.trl_error, result.nemo_gym_error = errors["trl"], errors["nemo-gym"]


def run(root: Path) -> Consumers:
    started = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    summaries = build_exports(root)
    result = Consumers(root, summaries)
    result.timings["exports"] = time.monotonic() - started
    run_consumers(root, result)
    return result


def canon(value: Any) -> str:
    """A value as canonical JSON: key order ignored, types kept (``1``, ``1.0`` and ``true``
    differ, as they do in the file a trainer reads), so equal strings mean equal rows."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
