"""SFT rows rendered through a chat template that ships with TRL (``trl/chat_templates/*.jinja``),
by transformers' own ``apply_chat_template`` in its sandbox, as TRL's ``apply_chat_template`` calls
it for a ``messages`` row. Only where TRL is installed: TRL and transformers are imported on the
first rendering, never with the viewer."""

from __future__ import annotations

import importlib.util
import threading
from functools import cache
from pathlib import Path
from typing import Any

NOT_INSTALLED = (
    "TRL is not installed where this viewer runs: install it (pip install trl) beside lithify "
    "to render the rows through the chat templates it ships"
)


def templates_dir() -> Path | None:
    """TRL's folder of chat templates, found without importing TRL."""
    try:
        spec = importlib.util.find_spec("trl")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "chat_templates"
        if folder.is_dir():
            return folder
    return None


def templates() -> list[str]:
    """The names of the chat templates TRL ships, or none where it is not installed."""
    folder = templates_dir()
    return sorted(p.stem for p in folder.glob("*.jinja")) if folder else []


_lock = threading.Lock()


@cache
def _tokenizer() -> Any:
    """A tokenizer with no vocabulary and no special tokens: only its ``apply_chat_template``
    is used, and a model's own tokens (``bos_token``, ``eos_token``) are not known here."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))


def render(template: str, row: dict[str, Any]) -> dict[str, str]:
    """A row's ``messages`` and ``tools`` as the template prints them (``text``), or the error
    the template raised (``error``): a template may refuse what its model cannot express."""
    folder = templates_dir()
    if folder is None or template not in templates():
        raise ValueError(f"no chat template {template!r}")
    source = (folder / f"{template}.jinja").read_text(encoding="utf-8")
    with _lock:  # one first import, not one per request thread
        tokenizer = _tokenizer()
    try:
        text = tokenizer.apply_chat_template(
            row["messages"],  # a row without them is an error of its own, shown as one
            tools=row.get("tools") or None,  # as TRL: some templates print tool boilerplate for []
            tokenize=False,
            chat_template=source,
        )
    except Exception as e:  # the template's own refusal, or a row it cannot read
        return {"error": f"{type(e).__name__}: {e}"}
    return {"text": str(text)}
