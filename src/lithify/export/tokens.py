"""Token budgets: every row's length in the target model's tokens, counted as the trainer counts
it, and rows over ``--max-tokens`` dropped or, for SFT rows, cut to fit at a turn boundary
(docs/export.md, Token budgets).

A trainer truncates an example longer than its ``max_length`` from the end, where the assistant
turn the row exists for is: a row that does not fit teaches nothing, silently. The count is the
length of ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)`` on the row as
written, with the Hugging Face tokenizer of a local folder or the local cache (never downloaded).
``transformers`` is the optional extra ``lithify[tokens]``, imported only when counting.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from lithify.export.profiles import ProfileError
from lithify.export.rows import Row, has_prompt, prompt_digest

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

# Why other shapes are not counted (a usage error names it).
_NOT_COUNTED = {
    "native": "NeMo Gym rows hold Responses items, not chat messages: NeMo Gym's model server "
    "turns them into its model's prompt, which lithify cannot reproduce",
    "segment": "canonical segment rows hold canonical messages and turns, which no chat "
    "template reads as they are",
}

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
    """The chat template raised on a row (``chat_template_error``)."""


class TokenStats(msgspec.Struct, kw_only=True):
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
    cut: int  # rows written cut to fit (--fit split)


def check_options(
    kind: str, shape: str, *, images: bool, tokenizer: str | None, max_tokens: int | None, fit: str
) -> None:
    """Raise ``TokenizerError`` for token options that do not fit the export (cheap: loads
    nothing)."""
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
        raise TokenizerError("--fit split cuts SFT rows only (other rows over budget: --fit drop)")
    if shape in _NOT_COUNTED:
        raise TokenizerError(f"--tokenizer cannot count these rows: {_NOT_COUNTED[shape]}")
    if images:
        raise TokenizerError(
            "--tokenizer does not count image rows: their image tokens are the model "
            "processor's, not the tokenizer's"
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


class TokenCounter:
    """Counts rows of one shape with one tokenizer, as the trainer tokenizes them: the chat
    template applied to each sequence's messages with the row's tools as written (TRL's SFT and
    DPO trainers pass the ``tools`` column as it is); a row's count is its longest sequence."""

    def __init__(self, tokenizer: Any, shape: str) -> None:
        self.tokenizer = tokenizer
        self.sequences = _SEQUENCES[shape]
        self.tools = _TOOLS.get(shape, "tools")

    def texts(self, data: dict[str, Any]) -> list[str]:
        """The text of each of the row's sequences, as the chat template renders it. Raises
        ``TemplateFailed``."""
        tools = _get(data, self.tools)
        out = []
        for seq in self.sequences:
            messages = [m for path in seq for m in _get(data, path)]
            try:
                text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
            except Exception as e:  # a template's raise_exception, or what its code trips on
                raise TemplateFailed(f"{type(e).__name__}: {e}") from None
            out.append(text)
        return out

    def lengths(self, texts: list[str]) -> list[int]:
        """Tokens in each text, tokenized as ``apply_chat_template(tokenize=True)`` tokenizes
        what it renders (no special tokens added: the template wrote its own). One call for
        many texts: a fast tokenizer encodes them in parallel."""
        if not texts:
            return []
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [len(i) for i in ids]

    def count(self, data: dict[str, Any]) -> int:
        return max(self.lengths(self.texts(data)))

    def count_many(self, rows: list[Row]) -> list[int | None]:
        """Each row's count (None: its template fails on it), the texts encoded together."""
        texts: list[str] = []
        spans: list[tuple[int, int] | None] = []
        for row in rows:
            try:
                found = self.texts(row.data)
            except TemplateFailed:
                spans.append(None)
                continue
            spans.append((len(texts), len(texts) + len(found)))
            texts += found
        lengths = self.lengths(texts)
        return [None if sp is None else max(lengths[sp[0] : sp[1]]) for sp in spans]


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
        max_tokens: int | None,
        fit: str,
        validator: RowValidator,
        compares: bool,
    ) -> None:
        self.counter = TokenCounter(tokenizer, shape)
        self.name = name
        self.sha256 = fingerprint(tokenizer)
        self.shape = shape
        self.max_tokens = max_tokens
        self.fit = fit
        self.validator = validator
        self.compares = compares  # rows go to both splits: prompts are compared
        self.over = 0  # rows left out: over_token_budget
        self.failed = 0  # rows left out: chat_template_error
        self.cut = 0  # rows written cut to fit
        self.counts: Counter[int] = Counter()
        self._cuts: Counter[bytes] = Counter()  # eval rows cut, by prompt digest
        self._eval: dict[bytes, list[int]] = {}  # eval rows' counts by prompt digest
        self._start: tuple[str, int] = ("", 0)  # (segment id, messages cut) of the last cut row

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
            if n is None:
                self.failed += 1
                continue
            cut = 0
            if self.max_tokens is not None and n > self.max_tokens:
                found = self._fit(row) if self.fit == "split" else None
                if found is None:
                    self.over += 1
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
            try:
                n = self.counter.count(new)
            except TemplateFailed:
                continue  # this cut does not render: a later one may
            if n <= self.max_tokens:  # type: ignore[operator]
                self._start = (segment, cut)
                return self._rebuilt(row, new, kept[: len(kept) - len(target)]), n, cut
        return None

    def _rebuilt(self, row: Row, data: dict[str, Any], prompt: list[dict[str, Any]]) -> Row:
        """A cut row, its prompt digest that of its new prompt (encoded with its count)."""
        digest = prompt_digest(prompt, data["tools"]) if self.compares else row.prompt
        return Row(data, b"", row.split, digest, row.source_ids, None, row.media)

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
        )
