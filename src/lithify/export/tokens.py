"""Token budgets: every row's length in the target model's tokens, counted as the trainer counts
it, and rows over ``--max-tokens`` dropped or, for SFT rows, cut to fit at a turn boundary
(docs/export.md, Token budgets).

A trainer truncates an example longer than its ``max_length`` from the end, where the assistant
turn the row exists for is: a row that does not fit teaches nothing, silently. The count is the
length of ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)`` on the row as
written (NeMo Gym rows: their prompt, with the generation prompt; canonical and NeMo Gym RL
rows: their trajectory; both as the chat messages they become), with the Hugging Face tokenizer
of a local folder or the local cache (never downloaded). TRL vision rows, when the model has a
processor, are counted as TRL's vision collator builds them: the processor's chat template, then
the processor on that text and the row's images (each image its own number of tokens).
``transformers`` (and Pillow, for images) is the optional extra ``lithify[tokens]``, imported
only when counting.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from lithify.export.media import MEDIA_TYPES, Media, blob_bytes
from lithify.export.profiles import ProfileError
from lithify.export.rows import Row, has_prompt, prompt_digest
from lithify.export.trainer import RowSkip, trainer_messages
from lithify.model import BlobPart, Message

if TYPE_CHECKING:
    from lithify.export.validate import RowValidator

TOKENS_EXTRA = "pip install 'lithify[tokens]'"
FITS = ("drop", "split")  # what becomes of a row over the budget

# The row shapes whose rows are chat messages a chat template renders, and how: the lists that
# make the trainer's sequence (one per sequence: DPO's chosen and rejected are two, the longer
# counts), and where the tools are.
_SEQUENCES: dict[str, tuple[tuple[str, ...], ...]] = {
    "messages": (("messages",),),
    "prompt-completion": (("prompt", "completion"),),
    "preference": (("prompt", "chosen"), ("prompt", "rejected")),
    "openai-preference": (
        ("input.messages", "preferred_output"),
        ("input.messages", "non_preferred_output"),
    ),
}
_TOOLS = {"openai-preference": "input.tools"}

# The roles a cut may start at: a person's turn or the model's; never a tool result, whose call
# would be cut away before it.
_TURN_STARTS = frozenset({"user", "assistant"})
_HEAD_ROLES = frozenset({"system", "developer"})


class TokenizerError(ProfileError):
    """A tokenizer that cannot be had or used: the extra missing, a name not in the local
    cache, no chat template; or token options that do not fit the export (a usage error)."""


# Rows counted together: their texts go to the tokenizer in one call (in parallel, in Rust).
_BATCH = 64


class TemplateFailed(Exception):
    """A row that cannot be counted: the chat template raised on it (``chat_template_error``),
    or a canonical or Responses row holds what no chat message can (a ``SKIP_REASONS`` key)."""

    def __init__(self, detail: str, reason: str = "chat_template_error") -> None:
        super().__init__(detail)
        self.reason = reason


# How the images of TRL vision rows were counted (``TokenStats.images``).
PROCESSOR, PLACEHOLDERS = "processor", "placeholders"


class TokenStats(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What counting did: the tokenizer, the budget, and the token counts of the rows written
    (nearest-rank percentiles; ``None`` when no row was written)."""

    tokenizer: str  # as given: a folder or a name in the local Hugging Face cache
    sha256: str  # of the tokenizer as loaded (its vocabulary, rules and chat template)
    max_tokens: int | None
    fit: str
    rows: int  # rows written, each counted
    min: int | None
    median: int | None
    p95: int | None
    max: int | None
    cut: int  # rows written cut to fit
    # TRL vision rows: their images counted by the model's processor, or only as the template's
    # placeholders (no processor; no budget allowed then). Absent for rows without images.
    images: str | None = None


def check_options(kind: str, *, tokenizer: str | None, max_tokens: int | None, fit: str) -> None:
    """Raise ``TokenizerError`` for token options that do not fit the export (cheap: loads
    nothing). Every kind, shape and profile is counted; only SFT rows are cut to fit."""
    if fit not in FITS:
        raise TokenizerError(f"--fit must be one of {', '.join(FITS)}")
    if tokenizer is None:
        if max_tokens is not None:
            raise TokenizerError("--max-tokens needs --tokenizer: tokens are counted with it")
        if fit != "drop":
            raise TokenizerError("--fit needs --tokenizer and --max-tokens")
        return
    if max_tokens is not None and max_tokens < 1:
        raise TokenizerError("--max-tokens must be 1 or more")
    if fit == "split" and max_tokens is None:
        raise TokenizerError("--fit split needs --max-tokens")
    if fit == "split" and kind != "sft":
        raise TokenizerError(
            "--fit split cuts SFT rows only: a preference pair, an RL trajectory or a NeMo Gym "
            "task cut short is another example (rows of these over the budget: --fit drop)"
        )


def load_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer at the folder ``name``, or named ``name`` in the local cache;
    never downloaded. Raises ``TokenizerError``."""
    import os

    # transformers warns on import that PyTorch is absent: counting needs no PyTorch.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerError(f"--tokenizer needs transformers: {TOKENS_EXTRA}") from None
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as e:
        raise TokenizerError(
            f"no tokenizer {name!r} in that folder or in the local Hugging Face cache "
            f"(it is never downloaded: fetch it first): {_first_line(e)}"
        ) from None
    if not getattr(tok, "chat_template", None):
        raise TokenizerError(f"the tokenizer {name!r} has no chat template: rows cannot be counted")
    return tok


# The processor last loaded, with the tokenizer it was loaded beside: a Ray worker counts many
# sessions with one tokenizer (export.distributed) and loads its processor once.
_processor: tuple[Any, Any] | None = None


def load_processor(name: str, tokenizer: Any) -> Any | None:
    """The Hugging Face processor of the model ``name`` (``AutoProcessor``, local files only)
    that ``tokenizer`` was loaded from, or None when it has none (a text-only model). Raises
    ``TokenizerError`` when it has one that cannot be loaded."""
    global _processor
    if _processor is not None and _processor[0] is tokenizer:
        return _processor[1]
    from transformers import AutoProcessor, ProcessorMixin

    try:
        found = AutoProcessor.from_pretrained(name, local_files_only=True)
    except Exception as e:  # transformers raises what its loaders raise: ImportError, OSError…
        raise TokenizerError(
            f"the processor of {name!r} cannot be loaded, and TRL vision rows are counted with "
            f"it (Qwen2-VL's and other processors with a video part need torch and "
            f"torchvision): {_first_line(e)}"
        ) from None
    # Without a processor's files, AutoProcessor gives the tokenizer.
    has = isinstance(found, ProcessorMixin) and getattr(found, "image_processor", None) is not None
    processor = found if has else None
    if processor is not None and not getattr(processor, "chat_template", None):
        raise TokenizerError(
            f"the processor of {name!r} has no chat template: rows cannot be counted"
        )
    _processor = (tokenizer, processor)
    return processor


def _processor_fingerprint(tokenizer_sha256: str, processor: Any) -> str:
    """The SHA-256 of the tokenizer's fingerprint and what decides the processor's image
    tokens: its class, its image processor's settings, its chat template."""
    h = hashlib.sha256(tokenizer_sha256.encode())
    h.update(type(processor).__name__.encode())
    h.update(processor.image_processor.to_json_string().encode())
    h.update(orjson.dumps(processor.chat_template, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def fingerprint(tok: Any) -> str:
    """The SHA-256 of what decides a tokenizer's counts: its rules and vocabulary (the fast
    tokenizer's own JSON, keys sorted; else the vocabulary), special tokens, chat template."""
    h = hashlib.sha256()
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        h.update(orjson.dumps(orjson.loads(backend.to_str()), option=orjson.OPT_SORT_KEYS))
    else:
        h.update(orjson.dumps(sorted(tok.get_vocab().items())))
    h.update(orjson.dumps(tok.chat_template, option=orjson.OPT_SORT_KEYS))
    h.update(orjson.dumps(tok.special_tokens_map, option=orjson.OPT_SORT_KEYS, default=str))
    return h.hexdigest()


def _get(data: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        data = data[key]
    return data


# -- rows that are not chat messages ---------------------------------------------------------


def responses_chat(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses input items as the chat messages NeMo Gym's model server gives its model's
    chat template: NeMo Gym's own conversion (reasoning as ``<think>…</think>`` before the
    assistant's text, consecutive assistant items one message, a function call's output a tool
    message), then vLLM's (tool-call arguments parsed from their JSON), without the empty
    ``tool_calls`` NeMo Gym gives an assistant message that calls no tool. Raises
    ``TemplateFailed`` for content NeMo Gym does not convert (a file)."""
    out: list[dict[str, Any]] = []
    text = ""
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal text, calls
        if calls:
            out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif text:
            # NeMo Gym writes an empty list here, which a template like Llama 3.1's takes for
            # a tool call (and fails on): a message without tool calls carries none.
            out.append({"role": "assistant", "content": text})
        text, calls = "", []

    for item in items:
        kind = item.get("type") or "message"
        if kind == "reasoning":
            text += "".join(f"<think>{s['text']}</think>" for s in item["summary"] if s["text"])
        elif kind == "function_call":
            try:
                arguments = orjson.loads(item["arguments"]) if item["arguments"] else {}
            except orjson.JSONDecodeError as e:  # vLLM's parse would fail on it too
                raise TemplateFailed(f"tool-call arguments that are not JSON: {e}") from None
            function = {"arguments": arguments, "name": item["name"]}
            calls.append({"id": item["call_id"], "function": function, "type": "function"})
        elif kind == "function_call_output":
            flush()
            out.append({"content": item["output"], "role": "tool", "tool_call_id": item["call_id"]})
        elif item["role"] == "assistant":
            content = item["content"]
            text += (
                content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
            )
        else:
            flush()
            out.append({"content": _chat_content(item["content"]), "role": item["role"]})
    flush()
    return out


def _chat_content(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for c in content:
        if c["type"] == "input_text":
            parts.append({"type": "text", "text": c["text"]})
        elif c["type"] == "input_image":
            url = {"url": c.get("image_url", ""), "detail": c.get("detail", "auto")}
            parts.append({"type": "image_url", "image_url": url})
        else:  # NeMo Gym 0.4.0 converts no input_file
            said = f"a {c['type']} NeMo Gym's model server does not convert"
            raise TemplateFailed(said, "media_unsupported")
    return parts


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses function tools as Chat Completions tools, as NeMo Gym converts them (``type``
    and ``strict`` dropped, the rest the function)."""
    out = []
    for t in tools:
        function = {k: v for k, v in t.items() if k not in ("type", "strict")}
        out.append({"type": "function", "function": function})
    return out


_IMAGES, _NO_MEDIA = Media("images"), Media()


def canonical_chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical messages (as canonical NeMo Gym and RL rows hold them) as the chat messages the
    canonical trainer form writes (``thinking``, which transformers passes to templates as
    ``reasoning_content``; arguments as objects); a message that shows images has a content
    list with an ``{"type": "image"}`` entry for each, as TRL vision rows do. Raises
    ``TemplateFailed`` with the reason a trainer row would be skipped for (an image by URL or
    file id, a document, a server tool, an orphan tool result…)."""
    calls: dict[str, str] = {}  # tool-call ids seen so far → names, for the tool results
    out: list[dict[str, Any]] = []
    try:
        for m in msgspec.convert(messages, list[Message]):
            media = _IMAGES if any(isinstance(p, MEDIA_TYPES) for p in m.parts) else _NO_MEDIA
            out += trainer_messages([m], calls, media, [])
    except RowSkip as e:
        raise TemplateFailed(str(e), e.reason) from None
    return out


# -- counting --------------------------------------------------------------------------------

# A conversation the template renders: its messages, its tools, whether the generation prompt
# (the start of the model's turn) is added.
Conversation = tuple[list[dict[str, Any]], Any, bool]


class TokenCounter:
    """Counts rows of one kind and shape with one tokenizer, as the trainer tokenizes them: the
    chat template applied to each sequence's messages with the row's tools as written (TRL's SFT
    and DPO trainers pass the ``tools`` column as it is); a row's count is its longest sequence.

    NeMo Gym rows count the prompt the policy model is sent (their input, the generation prompt
    added), RL rows of the canonical and NeMo Gym profiles the whole trajectory; both through
    the chat messages they become (``responses_chat``, ``canonical_chat``).

    With a ``processor``, TRL vision rows count as TRL's vision SFT collator builds them
    (``DataCollatorForVisionLanguageModeling``): the processor's chat template applied to the
    messages alone (TRL's vision trainer keeps no ``tools`` column), then the processor on that
    text and the row's images, which expands each image's placeholder into its image tokens."""

    def __init__(
        self,
        tokenizer: Any,
        shape: str,
        kind: str = "sft",
        text: TextCounter | None = None,
        processor: Any = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.shape = shape
        self.prompt_only = kind == "nemo-gym"
        self.sequences = _SEQUENCES.get(shape, ())
        self.tools = _TOOLS.get(shape, "tools")
        self.encoder = text if text is not None else TextCounter(tokenizer)
        self.processor = processor
        self.images = None if processor is None else ImageTokens(processor, self.encoder)
        _memoize_sandbox(tokenizer)

    def conversations(self, data: dict[str, Any]) -> list[Conversation]:
        """What the template renders for the row. Raises ``TemplateFailed``."""
        if self.sequences:
            tools = _get(data, self.tools)
            return [
                ([m for p in seq for m in _get(data, p)], tools, False) for seq in self.sequences
            ]
        params = data["responses_create_params"]
        if self.shape == "native":
            items = (
                params["input"] if self.prompt_only else params["input"] + data["recorded_output"]
            )
            return [(responses_chat(items), responses_tools(params["tools"]), self.prompt_only)]
        messages = list(params["input"])  # canonical segment rows
        if not self.prompt_only:
            for turn in data["turns"]:
                messages += turn["messages"]
                if turn["output"] is not None:
                    messages.append(turn["output"])
        return [(canonical_chat(messages), data["tools"], self.prompt_only)]

    def texts(self, data: dict[str, Any]) -> list[str]:
        """The text of each of the row's sequences, as the chat template renders it. Raises
        ``TemplateFailed``."""
        out = []
        for messages, tools, prompt in self.conversations(data):
            try:
                text = self.tokenizer.apply_chat_template(
                    messages, tools=tools, tokenize=False, add_generation_prompt=prompt
                )
            except Exception as e:  # a template's raise_exception, or what its code trips on
                raise TemplateFailed(f"{type(e).__name__}: {e}") from None
            out.append(text)
        return out

    def lengths(self, texts: list[str]) -> list[int]:
        """Tokens in each text, tokenized as ``apply_chat_template(tokenize=True)`` tokenizes
        what it renders (no special tokens added: the template wrote its own)."""
        return self.encoder.lengths(texts)

    def count(self, data: dict[str, Any], media: list[BlobPart] | None = None) -> int:
        """The row's count (``media``: the images a vision row shows, in order). Raises
        ``TemplateFailed``."""
        if media is not None and self.processor is not None:
            return self.vision(data, media)
        return max(self.lengths(self.texts(data)))

    def vision(self, data: dict[str, Any], media: list[BlobPart]) -> int:
        """A vision row's count: the length of the ``input_ids`` the processor makes of its
        rendered messages and its images, as TRL's collator calls it. Raises
        ``TemplateFailed``."""
        assert self.images is not None
        ((messages, _, prompt),) = self.conversations(data)
        try:
            text = self.processor.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=prompt
            )
            return self.images.count(text, media)
        except Exception as e:  # the template's raise, or an image the processor cannot read
            raise TemplateFailed(f"{type(e).__name__}: {e}") from None

    def count_many(self, rows: list[Row]) -> list[int | TemplateFailed]:
        """Each row's count (or why it has none), the texts encoded together."""
        if self.processor is not None:
            return [self._try(row) for row in rows]
        texts: list[str] = []
        spans: list[tuple[int, int] | TemplateFailed] = []
        for row in rows:
            try:
                found = self.texts(row.data)
            except TemplateFailed as e:
                spans.append(e)
                continue
            spans.append((len(texts), len(texts) + len(found)))
            texts += found
        lengths = self.lengths(texts)
        return [
            sp if isinstance(sp, TemplateFailed) else max(lengths[sp[0] : sp[1]]) for sp in spans
        ]

    def _try(self, row: Row) -> int | TemplateFailed:
        try:
            return self.count(row.data, row.media)
        except TemplateFailed as e:
            return e


_CACHED_IMAGES = 1 << 16  # images whose tokens the counter remembers before it starts afresh


class ImageTokens:
    """The length of ``processor(text=[text], images=[images])["input_ids"][0]`` for vision
    rows, without processing every image of every row.

    A processor expands each image's placeholder into tokens whose number depends on that image
    (its size), not on the text around it: a row's count is its text's tokens plus what each of
    its images adds, found once per image (the processor on a message showing it alone) and
    remembered by the image's SHA-256. Rows of a session repeat their context's images, so an
    image is processed once, not once per row that shows it. The first row showing one image
    and the first showing several are also counted whole; where either differs, every row
    after is counted whole (a processor whose expansion depends on more than the image). So is a
    row whose text holds the image token other than once per image (a message quoting it): the
    processor's own call says what it makes of it, or raises as it would in the trainer."""

    def __init__(self, processor: Any, encoder: TextCounter) -> None:
        self.processor = processor
        self.encoder = encoder
        self.known: dict[str, int] = {}
        self.checked: set[bool] = set()  # rows checked whole: showing one image, several
        self.token: str = getattr(processor, "image_token", None) or ""
        try:
            lone = [{"role": "user", "content": [{"type": "image"}]}]
            self.lone = processor.apply_chat_template(lone, tokenize=False)
        except Exception:  # a template that renders no such message: every row whole
            self.lone = ""
        # Without an image token to see in the text, every row is counted whole.
        self.whole = not self.token or self.lone.count(self.token) != 1
        self.base = encoder.lengths([self.lone])[0]

    def count(self, text: str, media: list[BlobPart]) -> int:
        if self.whole or text.count(self.token) != len(media):
            return self._call(text, media)
        n = self.encoder.lengths([text])[0] + sum(self._adds(b) for b in media)
        several = len(media) > 1
        if media and several not in self.checked:
            self.checked.add(several)
            whole = self._call(text, media)
            self.whole = whole != n
            return whole
        return n

    def _adds(self, blob: BlobPart) -> int:
        n = self.known.get(blob.sha256)
        if n is None:
            if len(self.known) >= _CACHED_IMAGES:
                self.known.clear()
            n = self.known[blob.sha256] = self._call(self.lone, [blob]) - self.base
        return n

    def _call(self, text: str, media: list[BlobPart]) -> int:
        from PIL import Image

        images = [Image.open(io.BytesIO(blob_bytes(b))) for b in media]
        found = self.processor(
            text=[text], images=[images] if images else None, add_special_tokens=False
        )
        return len(found["input_ids"][0])


# Pre-tokenizers that treat every piece of a text alike, wherever it lies in the text (Metaspace
# with ``prepend_scheme`` ``first`` does not: it marks only the piece at offset 0).
_PIECEWISE_PRE = frozenset(
    {"ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "Metaspace"}
)
_CACHED_CHARS = 64 << 20  # pieces' text the counter remembers before it starts afresh


def _piecewise_pre(spec: Any) -> bool:
    if spec is None:
        return True
    if spec.get("type") == "Sequence":
        return all(_piecewise_pre(p) for p in spec.get("pretokenizers", ()))
    if spec.get("type") == "Metaspace" and spec.get("prepend_scheme", "always") == "first":
        return False
    return spec.get("type") in _PIECEWISE_PRE


def _alternation(contents: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching any of ``contents`` leftmost-longest, as the tokenizer finds them."""
    ordered = sorted({c for c in contents if c}, key=lambda c: (-len(c), c))
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


class TextCounter:
    """The length of ``tokenizer(text, add_special_tokens=False)`` for many texts, fast.

    A fast tokenizer first cuts a text at its added tokens (``<|im_start|>``, ``<|im_end|>``,
    …: one token each), then normalizes, pre-tokenizes and encodes every piece between them on
    its own. Rows of an agent session repeat one another's messages, and a chat template writes
    added tokens between messages, so the pieces repeat: each distinct piece is encoded once
    and remembered. Where a tokenizer's rules could make a piece's tokens depend on where it
    lies (added tokens that strip spaces or match whole words or normalized text, a pre-
    tokenizer that marks the first piece) every text is encoded whole."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.raw: re.Pattern[str] | None = None  # added tokens matched in the text as it is
        self.normal: re.Pattern[str] | None = None  # then in the pieces (no normalizer)
        self.piecewise = self.backend is not None and self._rules()
        self.known: dict[str, int] = {}
        self.held = 0

    def _rules(self) -> bool:
        if getattr(self.backend, "encode_special_tokens", True):
            return False
        spec = orjson.loads(self.backend.to_str())
        if not _piecewise_pre(spec.get("pre_tokenizer")):
            return False
        added = spec.get("added_tokens") or []
        if any(t["single_word"] or t["lstrip"] or t["rstrip"] for t in added):
            return False
        normalized = [t["content"] for t in added if t["normalized"]]
        if normalized and spec.get("normalizer") is not None:
            return False
        self.raw = _alternation(t["content"] for t in added if not t["normalized"])
        self.normal = _alternation(normalized)
        return True

    def _pieces(self, text: str) -> tuple[int, list[str]]:
        """The added tokens in ``text`` and the pieces between them (empty ones left out)."""
        found = 0
        pieces = [text]
        for pattern in (self.raw, self.normal):
            if pattern is None:
                continue
            split: list[str] = []
            for piece in pieces:
                parts = pattern.split(piece)
                found += len(parts) - 1
                split += parts
            pieces = split
        return found, [p for p in pieces if p]

    def lengths(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if not self.piecewise:
            ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
            return [len(i) for i in ids]
        plans = [self._pieces(t) for t in texts]
        known = self.known
        new = list(dict.fromkeys(p for _, pieces in plans for p in pieces if p not in known))
        if new:
            if self.held > _CACHED_CHARS:
                known.clear()
                self.held = 0
            for piece, n in zip(new, self._encode(new), strict=True):
                known[piece] = n
                self.held += len(piece)
        return [found + sum(known[p] for p in pieces) for found, pieces in plans]

    def _encode(self, pieces: list[str]) -> list[int]:
        backend = self.backend
        assert backend is not None
        if backend.truncation is not None or backend.padding is not None:
            # A tokenizer file may enable either; transformers turns them off for each call.
            ids = self.tokenizer(pieces, add_special_tokens=False)["input_ids"]
            return [len(i) for i in ids]
        fast = getattr(backend, "encode_batch_fast", None)  # no offsets: faster
        encode = fast if fast is not None else backend.encode_batch
        return [len(e.ids) for e in encode(pieces, add_special_tokens=False)]


def _memoize_sandbox(tokenizer: Any) -> None:
    """Make the tokenizer's compiled chat templates check an attribute's safety once per type
    and name, not at every access.

    transformers renders templates in Jinja's immutable sandbox, which asks of every attribute
    a template reads (``content.startswith``, ``message.get``…) whether it is safe: a third of
    the rendering time. The answer depends on the object's type and the name only (private and
    internal attributes, methods that change a list or dict), so remembering it changes nothing
    a template renders. Without transformers' template cache, templates render as before."""
    try:  # transformers' cache of compiled templates (one per template text)
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:
        return
    found = tokenizer.chat_template
    for template in found.values() if isinstance(found, dict) else [found]:
        try:
            env = _compile_jinja_template(template).environment
        except Exception:  # a template that does not compile fails on every row, as before
            continue
        if getattr(env, "lithify_memoized", False):
            continue
        check = env.is_safe_attribute
        answers: dict[tuple[type, str], bool] = {}

        def is_safe_attribute(
            obj: Any, attr: str, value: Any, check: Any = check, answers: Any = answers
        ) -> bool:
            key = (type(obj), attr)
            safe = answers.get(key)
            if safe is None:
                safe = answers[key] = check(obj, attr, value)
            return safe

        env.is_safe_attribute = is_safe_attribute
        env.lithify_memoized = True


def percentile(counts: Counter[int], percent: int) -> int | None:
    """The nearest-rank ``percent``-th percentile of a histogram: the smallest count that at
    least ``percent``% of the rows do not exceed (integers only: no rounding to disagree on)."""
    n = sum(counts.values())
    if not n:
        return None
    rank = max(1, -(-percent * n // 100))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable")


class TokenTally(msgspec.Struct):
    """What a token stage counted (``TokenBudget.tally``): a distributed export's tasks each
    count their sessions' rows, and the driver adds their tallies up (``TokenBudget.merge``)."""

    sha256: str  # of the tokenizer that counted
    left_out: dict[str, int]  # rows not written, by reason
    counts: dict[int, int]  # written rows' counts (eval rows of compared exports apart)
    cut: int
    evals: dict[bytes, list[int]]  # eval rows' counts, by prompt digest
    eval_cuts: dict[bytes, int]  # eval rows cut, by prompt digest


class TokenBudget:
    """The token stage of an export, after quality flags: counts each row, puts the count in
    ``metadata.tokens``, and drops (``over_token_budget``) or cuts rows over ``max_tokens``.

    Counts of written rows are kept as a histogram (memory: one entry per distinct count), eval
    rows' apart by prompt until the writer says which it left out (``eval_prompt_in_train``).
    """

    def __init__(
        self,
        tokenizer: Any,
        name: str,
        shape: str,
        *,
        kind: str = "sft",
        max_tokens: int | None,
        fit: str,
        validator: RowValidator,
        compares: bool,
        sha256: str | None = None,
        text: TextCounter | None = None,
    ) -> None:
        # ``sha256`` and ``text``: the tokenizer's fingerprint and text counter, when a process
        # that counts many exports' parts (a Ray worker) keeps them.
        sha256 = sha256 if sha256 is not None else fingerprint(tokenizer)
        # TRL vision rows (their schema has the images column) count with the model's processor.
        self.images: str | None = None
        processor = None
        if "images" in validator.schema["properties"]:
            processor = load_processor(name, tokenizer)
            if processor is None and max_tokens is not None:
                raise TokenizerError(
                    f"--max-tokens with --images needs the model's processor beside the "
                    f"tokenizer {name!r} (preprocessor_config.json): without it an image counts "
                    f"as its template placeholder, not the image tokens the trainer sees, and a "
                    f"row under the budget would still be cut by the trainer"
                )
            self.images = PLACEHOLDERS if processor is None else PROCESSOR
        self.counter = TokenCounter(tokenizer, shape, kind, text, processor)
        self.name = name
        self.sha256 = sha256 if processor is None else _processor_fingerprint(sha256, processor)
        self.shape = shape
        self.max_tokens = max_tokens
        self.fit = fit
        self.validator = validator
        self.compares = compares  # rows go to both splits: prompts are compared
        # Rows left out, by reason: over_token_budget, chat_template_error, or what a canonical
        # or Responses row holds that no chat message can.
        self.left_out: Counter[str] = Counter()
        self.cut = 0  # rows written cut to fit
        self.counts: Counter[int] = Counter()
        self._cuts: Counter[bytes] = Counter()  # eval rows cut, by prompt digest
        self._eval: dict[bytes, list[int]] = {}  # eval rows' counts by prompt digest
        self._start: tuple[str, int] = ("", 0)  # (segment id, messages cut) of the last cut row

    @property
    def over(self) -> int:
        return self.left_out["over_token_budget"]

    def apply(self, rows: Iterable[Row]) -> Iterator[Row]:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) == _BATCH:
                yield from self._batch(batch)
                batch = []
        yield from self._batch(batch)

    def _batch(self, rows: list[Row]) -> Iterator[Row]:
        for row, n in zip(rows, self.counter.count_many(rows), strict=True):
            if isinstance(n, TemplateFailed):
                self.left_out[n.reason] += 1
                continue
            cut = 0
            if self.max_tokens is not None and n > self.max_tokens:
                found = self._fit(row) if self.fit == "split" else None
                if found is None:
                    self.left_out["over_token_budget"] += 1
                    continue
                row, n, cut = found
            row = row.set_metadata(tokens=n, **({"context_cut": cut} if cut else {}))
            if cut:
                # Cut rows are new rows: validated whole, with their count.
                self.validator.check(row.data, row.source_ids)
            self._note(row, n, cut)
            yield row

    def _note(self, row: Row, n: int, cut: int) -> None:
        if row.split == "eval" and self.compares:
            self._eval.setdefault(row.prompt, []).append(n)
            if cut:
                self._cuts[row.prompt] += 1
            return
        self.counts[n] += 1
        self.cut += bool(cut)

    def _fit(self, row: Row) -> tuple[Row, int, int] | None:
        """``row`` cut to fit (``Row``, its count, messages cut), or None when it cannot be.

        The row keeps its leading system and developer messages and its target (the last
        message, or the completion), and of the messages between, the longest tail that starts
        at a turn boundary (a user or assistant message: a tool result never loses its call)
        and still holds something to answer (a user or tool message). Within a segment a row
        is cut no earlier than the segment's last cut row was: rows extend one another, so the
        search resumes where the last one stopped, and a segment costs a count per boundary.
        A vision row keeps the images of the messages it keeps.
        """
        data = row.data
        context_key = "messages" if self.shape == "messages" else "prompt"
        messages: list[dict[str, Any]] = data[context_key]
        if self.shape == "messages":
            context, target = messages[:-1], messages[-1:]
        else:
            context, target = messages, []
        head = 0
        while head < len(context) and context[head]["role"] in _HEAD_ROLES:
            head += 1
        body = context[head:]
        segment = data["metadata"]["segment_id"]
        first = self._start[1] if self._start[0] == segment else 1
        for cut in range(max(first, 1), len(body)):
            if body[cut]["role"] not in _TURN_STARTS or not has_prompt(
                m["role"] for m in body[cut:]
            ):
                continue
            kept = [*context[:head], *body[cut:], *target]
            new = {**data, context_key: kept}
            shown = None
            if row.media is not None:
                kept_images = _kept_images(data, row.media, head, head + cut)
                new["images"] = [data["images"][i] for i in kept_images]
                shown = [row.media[i] for i in kept_images]
            try:
                n = self.counter.count(new, shown)
            except TemplateFailed:
                continue  # this cut does not render: a later one may
            if n <= self.max_tokens:  # type: ignore[operator]
                self._start = (segment, cut)
                return self._rebuilt(row, new, kept[: len(kept) - len(target)], shown), n, cut
        return None

    def _rebuilt(
        self,
        row: Row,
        data: dict[str, Any],
        prompt: list[dict[str, Any]],
        media: list[Any] | None,
    ) -> Row:
        """A cut row, its prompt digest that of its new prompt (encoded with its count)."""
        digest = prompt_digest(prompt, data["tools"]) if self.compares else row.prompt
        return Row(data, b"", row.split, digest, row.source_ids, None, media)

    def tally(self) -> TokenTally:
        """What this stage counted, to ``merge`` into another's."""
        return TokenTally(
            self.sha256,
            dict(self.left_out),
            dict(self.counts),
            self.cut,
            self._eval,
            dict(self._cuts),
        )

    def merge(self, tally: TokenTally) -> None:
        """Add a task's ``tally``; raises ``TokenizerError`` when its tokenizer was another."""
        if tally.sha256 != self.sha256:
            raise TokenizerError(
                f"the tokenizer {self.name!r} on a Ray worker is not this one (SHA-256 "
                f"{tally.sha256}, here {self.sha256}): every node needs the same files"
            )
        self.left_out.update(tally.left_out)
        self.counts.update(tally.counts)
        self.cut += tally.cut
        for prompt, found in tally.evals.items():
            self._eval.setdefault(prompt, []).extend(found)
        self._cuts.update(tally.eval_cuts)

    def finish(self, left_out: set[bytes]) -> TokenStats:
        """The stats of the rows written, once the writer has left out the eval rows whose
        prompt is a train row's (``left_out``: their prompt digests)."""
        for prompt, found in self._eval.items():
            if prompt not in left_out:
                self.counts.update(found)
                self.cut += self._cuts[prompt]
        self._eval = {}
        return TokenStats(
            tokenizer=self.name,
            sha256=self.sha256,
            max_tokens=self.max_tokens,
            fit=self.fit,
            rows=sum(self.counts.values()),
            min=min(self.counts) if self.counts else None,
            median=percentile(self.counts, 50),
            p95=percentile(self.counts, 95),
            max=max(self.counts) if self.counts else None,
            cut=self.cut,
            images=self.images,
        )


def _images_of(message: dict[str, Any]) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for c in content if isinstance(c, dict) and c.get("type") == "image")


def _kept_images(data: dict[str, Any], media: list[Any], head: int, start: int) -> list[int]:
    """The indices in a vision row's images of those its messages show but the ones in
    ``[head, start)`` of its context (the images are in the order the messages show them)."""
    messages = data["messages"] if "messages" in data else data["prompt"] + data["completion"]
    kept: list[int] = []
    at = 0
    for i, m in enumerate(messages):
        n = _images_of(m)
        if not head <= i < start:
            kept += range(at, at + n)
        at += n
    assert at == len(media), "a vision row's images are those its messages show"
    return kept
