"""Token budgets for every row kind and profile (docs/export.md, Token budgets), JSONL and
Parquet: NeMo Gym rows count the prompt the policy model is sent, RL rows of the canonical and
NeMo Gym profiles their whole trajectory, TRL vision rows the text their template renders
(image placeholders included); each count is the tokenizer's own ``apply_chat_template(...,
tokenize=True)``, the summary, manifest and card report them, and the export replays byte for
byte. Also: the fast counter's pieces add up to the whole text's tokens (property test)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.cli import app
from lithify.export.tokens import (
    TextCounter,
    canonical_chat,
    load_tokenizer,
    responses_chat,
    responses_tools,
)
from lithify.model import Message, ServerToolCallPart, ServerToolCallResponsePart, encode
from tests.export.helpers import (
    assistant,
    blob,
    fact,
    feedback,
    media_sessions,
    png,
    read_rows,
    replay,
    run_export,
    system,
    text,
    user,
)
from tests.export.test_tokens import (
    BOS,
    EOS,
    PAD,
    agent_session,
    build_tokenizer,
    facts_and_feedback,
    reference_count,
)

runner = CliRunner()
QWEN_ADDED = ("<|im_start|>", "<think>", "</think>", "<tool_call>", "</tool_call>")
VISION_ADDED = ("<|im_start|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>")


@pytest.fixture(scope="module", params=["qwen3", "llama3_1"])
def tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Qwen3's own added tokens too: the counter cuts texts at them, as the tokenizer does.
    added = QWEN_ADDED if request.param == "qwen3" else ()
    return build_tokenizer(request.param, tmp_path_factory.mktemp(request.param), added)


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3_vl", tmp_path_factory.mktemp("qwen3_vl"), VISION_ADDED)


# (kind, profile, shape, images): every row shape in every profile that has it.
EVERY = [
    ("sft", "canonical", None, False),
    ("sft", "trl", None, False),
    ("sft", "axolotl", None, False),
    ("sft", "openai", None, False),
    ("sft", "canonical", "prompt-completion", False),
    ("sft", "trl", "prompt-completion", False),
    ("sft", "trl", None, True),
    ("nemo-gym", "canonical", None, False),
    ("nemo-gym", "nemo-gym", None, False),
    ("dpo", "canonical", None, False),
    ("dpo", "trl", None, False),
    ("dpo", "openai", None, False),
    ("rl", "canonical", None, False),
    ("rl", "trl", None, False),
    ("rl", "nemo-gym", None, False),
]


def every_facts() -> tuple[list[Any], list[Any]]:
    facts, fb = facts_and_feedback()
    vision = [f for f in media_sessions() if f.inference_call_id.startswith("vision")]
    return facts + vision, [*fb, feedback("s-vision", 0.5, kind="session")]


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    """Parquet rows as JSONL holds them: JSON columns decoded, images by their path."""
    out = []
    for row in pq.read_table(path).to_pylist():
        for k, v in row.items():
            if k == "images":
                row[k] = [f"images/{i['path']}" for i in v]
            elif isinstance(v, str):
                row[k] = orjson.loads(v)
        out.append(row)
    return out


def expected(tok: Any, kind: str, row: dict[str, Any]) -> int:
    """The count of a row from the row alone: the tokenizer's own apply_chat_template(tokenize
    =True) on the chat messages it becomes (NeMo Gym: its input and the generation prompt)."""

    def n(messages: list[dict[str, Any]], tools: Any, prompt: bool) -> int:
        found = tok.apply_chat_template(
            messages, tools=tools, add_generation_prompt=prompt, tokenize=True, return_dict=True
        )
        return len(found["input_ids"])

    prompt = kind == "nemo-gym"
    meta = {k: v for k, v in row["metadata"].items() if k != "tokens"}
    row = {**row, "metadata": meta}
    if "recorded_output" in row:
        params = row["responses_create_params"]
        items = params["input"] + ([] if prompt else row["recorded_output"])
        return n(responses_chat(items), responses_tools(params["tools"]), prompt)
    if "turns" in row:
        messages = list(row["responses_create_params"]["input"])
        for turn in [] if prompt else row["turns"]:
            messages += turn["messages"] + ([turn["output"]] if turn["output"] else [])
        return n(canonical_chat(messages), row["tools"], prompt)
    return reference_count(tok, row)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize(("kind", "profile", "shape", "images"), EVERY)
def test_every_kind_and_profile_is_counted(
    tokenizer: Path,
    vision: Path,
    kind: str,
    profile: str,
    shape: str | None,
    images: bool,
    fmt: str,
    tmp_path: Path,
) -> None:
    if images:  # a text-only template fails on content lists (chat_template_error): TRL's too
        tokenizer = vision
    facts, fb = every_facts()
    path = tmp_path / "facts.jsonl"
    path.write_bytes(b"".join(encode(f) + b"\n" for f in [*facts, *fb]))
    out = tmp_path / "out"
    args = ["export", kind, "--profile", profile, "--facts", str(path), "-o", str(out)]
    args += ["--format", fmt, "--tokenizer", str(tokenizer), "--eval-fraction", "0.3", "--json"]
    args += ["--shape", shape] if shape else []
    args += ["--images"] if images else []
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    ext = "jsonl" if fmt == "jsonl" else "parquet"
    read = read_rows if fmt == "jsonl" else parquet_rows
    rows = [*read(out / f"train.{ext}"), *read(out / f"eval.{ext}")]
    assert rows, "the export must make rows to count"
    assert len(rows) == sum(summary["rows"].values())
    tok = load_tokenizer(str(tokenizer))
    counts = [r["metadata"]["tokens"] for r in rows]
    assert counts == [expected(tok, kind, r) for r in rows]
    if images:  # the template renders each image's placeholder: counted
        assert any(r["images"] for r in rows)
    tokens = summary["tokens"]
    ordered = sorted(counts)
    assert tokens["rows"] == len(rows)
    assert (tokens["min"], tokens["max"]) == (ordered[0], ordered[-1])
    assert tokens["median"] == ordered[(len(ordered) + 1) // 2 - 1]
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["tokens"] == tokens
    card = (out / "README.md").read_text()
    assert "## Token budget" in card and f"| p95 | {tokens['p95']} |" in card
    assert RULES[kind, profile] in " ".join(card.split())
    again = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout)["identical"] is True


# What the card says was counted, per kind and profile.
_CHAT = "its chat template applied to the row's messages with the row's tools"
RULES = {
    **{("sft", p): _CHAT for p in ("canonical", "trl", "axolotl", "openai")},
    ("dpo", "canonical"): "the longer of prompt + chosen and prompt + rejected",
    ("dpo", "trl"): "the longer of prompt + chosen and prompt + rejected",
    ("dpo", "openai"): "the longer of prompt + chosen and prompt + rejected",
    ("rl", "trl"): "prompt and completion together",
    ("nemo-gym", "canonical"): "the prompt the policy model is sent",
    ("nemo-gym", "nemo-gym"): "the prompt the policy model is sent",
    ("rl", "canonical"): "the whole trajectory",
    ("rl", "nemo-gym"): "the whole trajectory",
}


def test_canonical_rows_count_what_the_sft_rows_of_their_session_hold(
    tokenizer: Path, tmp_path: Path
) -> None:
    # Independent of the conversion: a canonical RL row's trajectory is the conversation the
    # last canonical SFT row of its segment holds; a canonical NeMo Gym row's prompt is the
    # first SFT row's context, the generation prompt added.
    facts = agent_session("r1", 4, users=frozenset({2}))
    fb = [feedback("r1", 1.0, kind="session")]
    common: dict[str, Any] = {"profile": "canonical", "tokenizer": str(tokenizer)}
    for kind in ("sft", "rl", "nemo-gym"):
        run_export(facts, tmp_path / kind, fb, kind=kind, **common)
    sft = read_rows(tmp_path / "sft" / "train.jsonl")
    [rl] = read_rows(tmp_path / "rl" / "train.jsonl")
    [gym] = read_rows(tmp_path / "nemo-gym" / "train.jsonl")
    tok = load_tokenizer(str(tokenizer))
    last, first = sft[-1], sft[0]
    whole = tok.apply_chat_template(last["messages"], tools=last["tools"], tokenize=True)
    assert rl["metadata"]["tokens"] == len(whole["input_ids"])
    prompt = tok.apply_chat_template(
        first["messages"][:-1], tools=first["tools"], add_generation_prompt=True, tokenize=True
    )
    assert gym["metadata"]["tokens"] == len(prompt["input_ids"])
    assert rl["metadata"]["tokens"] > gym["metadata"]["tokens"]


def test_nemo_gym_rows_over_the_budget_are_dropped(tokenizer: Path, tmp_path: Path) -> None:
    facts = [*agent_session("a", 1, size=4), *agent_session("b", 1, size=60)]
    opts: dict[str, Any] = {"kind": "nemo-gym", "profile": "nemo-gym"}
    run_export(facts, tmp_path / "all", tokenizer=str(tokenizer), **opts)
    small, big = sorted(r["metadata"]["tokens"] for r in read_rows(tmp_path / "all/train.jsonl"))
    summary = run_export(
        facts, tmp_path / "cut", tokenizer=str(tokenizer), max_tokens=small, **opts
    )
    [kept] = read_rows(tmp_path / "cut" / "train.jsonl")
    assert kept["metadata"]["tokens"] == small < big
    assert summary.skipped["over_token_budget"] == 1


def test_a_canonical_row_no_chat_message_can_hold_is_left_out_by_its_reason(
    qwen3: Path, tmp_path: Path
) -> None:
    # A provider-run tool (web search) has no chat-message form: the template cannot count it.
    search = Message(
        "assistant",
        [
            ServerToolCallPart("ws1", "web_search", {"type": "web_search_call", "id": "ws1"}),
            ServerToolCallResponsePart("ws1", {"type": "web_search_result"}),
            text("Team A won."),
        ],
    )
    facts = [
        fact("ws", [user("Who won?")], [search], session="s1", tools=[]),
        fact("ok", [user("Hi?")], [assistant(text("Hello."))], session="s2", tools=[]),
    ]
    plain = run_export(facts, tmp_path / "plain", kind="nemo-gym")
    assert plain.rows["train"] == 2  # canonical rows carry it
    summary = run_export(facts, tmp_path / "o", kind="rl", tokenizer=str(qwen3), reward="x")
    assert summary.skipped.get("no_reward") == 2  # RL rows need a reward: NeMo Gym's here
    summary = run_export(facts, tmp_path / "o", kind="nemo-gym", tokenizer=str(qwen3))
    # The prompt holds no server tool: counted. A trajectory that does is not.
    assert summary.rows["train"] == 2
    fb = [feedback("s1", 1.0, kind="session"), feedback("s2", 1.0, kind="session")]
    summary = run_export(facts, tmp_path / "rl", fb, kind="rl", tokenizer=str(qwen3))
    assert summary.skipped == {"server_tool_unsupported": 1}
    assert summary.rows["train"] == 1


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3", tmp_path_factory.mktemp("qwen3"), QWEN_ADDED)


def vision_session(sid: str, rounds: int) -> list[Any]:
    """A session that shows an image at every user turn."""
    rng = random.Random(sid)
    inputs: list[Message] = [system("Describe images.")]
    out = []
    for r in range(rounds):
        image = blob(png(r + 1, 2, (rng.randrange(256), 0, 0)), "image/png")
        inputs.append(Message("user", [text(f"Picture {r}, what is it?"), image]))
        answer = assistant(text(" ".join(["red"] * (r + 3))))
        out.append(fact(f"{sid}-{r}", list(inputs), [answer], session=sid, second=r, tools=[]))
        inputs.append(replay(answer))
    return out


def test_vision_rows_count_the_image_placeholders(vision: Path, tmp_path: Path) -> None:
    facts = vision_session("v", 3)
    opts: dict[str, Any] = {"kind": "sft", "profile": "trl", "images": True}
    run_export(facts, tmp_path / "o", tokenizer=str(vision), **opts)
    rows = read_rows(tmp_path / "o" / "train.jsonl")
    tok = load_tokenizer(str(vision))
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    for row in rows:
        ids = tok.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True)
        assert row["metadata"]["tokens"] == len(ids["input_ids"])
        assert ids["input_ids"].count(pad) == len(row["images"]) > 0  # one per image shown


# -- the fast counter --------------------------------------------------------------------------

_SPECIALS = [BOS, EOS, PAD, *QWEN_ADDED]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.sampled_from(_SPECIALS),
                st.text(alphabet=st.sampled_from("ab <|>\n\t é日"), max_size=12),
                st.sampled_from(["the agent", " looks up", "\n\n", "  ", "<|im_", "end|>"]),
            ),
            max_size=12,
        ).map("".join),
        min_size=1,
        max_size=6,
    )
)
def test_pieces_add_up_to_the_whole_texts_tokens(qwen3: Path, texts: list[str]) -> None:
    tok = load_tokenizer(str(qwen3))
    counter = TextCounter(tok)
    assert counter.piecewise
    whole = [len(i) for i in tok(texts, add_special_tokens=False)["input_ids"]]
    assert counter.lengths(texts) == whole
    assert counter.lengths(texts[::-1]) == whole[::-1]  # from what it remembers


def test_a_tokenizer_file_that_truncates_or_pads_is_counted_in_full(qwen3: Path) -> None:
    # tokenizer.json may enable truncation or padding; transformers turns them off per call,
    # and so the counts do not depend on them.
    tok = load_tokenizer(str(qwen3))
    texts = ["the agent looks up the order " * 20 + EOS, "sunny"]
    whole = [len(i) for i in tok(texts, add_special_tokens=False)["input_ids"]]
    for setting in ("truncation", "padding"):
        fresh = load_tokenizer(str(qwen3))
        if setting == "truncation":
            fresh.backend_tokenizer.enable_truncation(8)
        else:
            fresh.backend_tokenizer.enable_padding(length=300)
        assert TextCounter(fresh).lengths(texts) == whole > [8, 8]


def test_a_tokenizer_whose_pieces_depend_on_their_place_is_counted_whole(tmp_path: Path) -> None:
    # SentencePiece-style Metaspace marking only the text's first piece, and an added token that
    # strips the spaces before it: the counter does not cut these texts, and still agrees.
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    for name, pre, added in (
        ("first", pre_tokenizers.Metaspace(prepend_scheme="first"), AddedToken(EOS)),
        ("lstrip", pre_tokenizers.ByteLevel(), AddedToken(EOS, lstrip=True, special=True)),
    ):
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre
        tok.train_from_iterator(
            ["the agent looks up the order"] * 3,
            trainers.BpeTrainer(vocab_size=80, special_tokens=["<unk>"], show_progress=False),
        )
        tok.add_special_tokens([added])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS)
        counter = TextCounter(fast)
        assert not counter.piecewise, name
        texts = [f"the agent {EOS} looks up", f"{EOS}the order {EOS}  up"]
        whole = [len(i) for i in fast(texts, add_special_tokens=False)["input_ids"]]
        assert counter.lengths(texts) == whole


def test_counting_leaves_the_templates_rendering_as_it_was(qwen3: Path) -> None:
    # The sandbox's answers remembered per type and name: what a fresh tokenizer (no memo)
    # renders is what the counter's renders, and an unsafe attribute is still refused.
    import jinja2
    from transformers import AutoTokenizer

    from lithify.export.tokens import TokenCounter

    facts, _ = facts_and_feedback()
    run_rows = [
        {"messages": [*f.input_messages, *f.output_messages], "tools": []} for f in facts[:3]
    ]
    tok = load_tokenizer(str(qwen3))
    before = [
        tok.apply_chat_template(canonical_chat(_dicts(r["messages"])), tokenize=False)
        for r in run_rows
    ]
    TokenCounter(tok, "messages")
    after = [
        tok.apply_chat_template(canonical_chat(_dicts(r["messages"])), tokenize=False)
        for r in run_rows
    ]
    assert before == after
    evil = AutoTokenizer.from_pretrained(str(qwen3), local_files_only=True)
    evil.chat_template = "{{ messages.__class__ }}{{ messages.append(1) }}"
    TokenCounter(evil, "messages")
    with pytest.raises(jinja2.exceptions.SecurityError):
        evil.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)


def _dicts(messages: list[Message]) -> list[dict[str, Any]]:
    import msgspec

    return [msgspec.to_builtins(m) for m in messages]


def test_a_tally_from_another_tokenizer_is_refused(qwen3: Path, tmp_path: Path) -> None:
    # A Ray task counts with its node's copy of the tokenizer: the driver adds up its tally only
    # when that copy is the driver's (the same SHA-256).
    from lithify.export import ExportOptions, make_builder
    from lithify.export.pipeline import token_budget
    from lithify.export.tokens import TokenizerError

    other = build_tokenizer("llama3_1", tmp_path / "llama")
    budgets = []
    for folder in (qwen3, other):
        options = ExportOptions(kind="sft", profile="trl", tokenizer=str(folder))
        budget = token_budget(options, make_builder(options))
        assert budget is not None
        budgets.append(budget)
    mine, theirs = budgets
    mine.merge(mine.tally())  # its own: fine
    with pytest.raises(TokenizerError, match="every node needs the same files"):
        mine.merge(theirs.tally())


@pytest.mark.parametrize("kind", ["nemo-gym", "rl"])
def test_canonical_rows_show_their_images_as_placeholders(
    vision: Path, qwen3: Path, tmp_path: Path, kind: str
) -> None:
    # An image in a canonical row is a content list with an image entry, as in TRL vision rows:
    # a vision template counts its placeholder.
    facts = vision_session("v", 2)
    fb = [feedback("v", 1.0, kind="session")]
    run_export(facts, tmp_path / "vl", fb, kind=kind, tokenizer=str(vision))
    [row] = read_rows(tmp_path / "vl" / "train.jsonl")
    tok = load_tokenizer(str(vision))
    ids = tok.apply_chat_template(
        canonical_chat(
            row["responses_create_params"]["input"]
            + ([] if kind == "nemo-gym" else [m for t in row["turns"] for m in t["messages"]])
            + ([] if kind == "nemo-gym" else [t["output"] for t in row["turns"]][-1:])
        ),
        tools=row["tools"],
        add_generation_prompt=kind == "nemo-gym",
        tokenize=True,
    )["input_ids"]
    shown = 1 if kind == "nemo-gym" else 2
    assert ids.count(tok.convert_tokens_to_ids("<|image_pad|>")) == shown
    if kind == "nemo-gym":
        assert row["metadata"]["tokens"] == len(ids)
    # Qwen3's text template writes no content for a list: counted without the image.
    run_export(facts, tmp_path / "text", fb, kind=kind, tokenizer=str(qwen3))
    [plain] = read_rows(tmp_path / "text" / "train.jsonl")
    assert plain["metadata"]["tokens"] == expected(load_tokenizer(str(qwen3)), kind, plain)


def test_responses_items_nemo_gym_would_not_convert_are_not_counted() -> None:
    from lithify.export.tokens import TemplateFailed

    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{not json"}
    with pytest.raises(TemplateFailed) as bad:
        responses_chat([{"role": "user", "content": "x"}, call])
    assert bad.value.reason == "chat_template_error"
    pdf = {"type": "input_file", "file_data": "data:application/pdf;base64,AA", "filename": "a"}
    with pytest.raises(TemplateFailed) as file:
        responses_chat([{"type": "message", "role": "user", "content": [pdf]}])
    assert file.value.reason == "media_unsupported"
    # Reasoning summaries, text and a call are one assistant message, as NeMo Gym makes it.
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "a"}]},
        {"type": "message", "role": "assistant", "content": "b"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "message", "role": "assistant", "content": "done"},
    ]
    assert responses_chat(items) == [
        {"content": [{"type": "text", "text": "hi"}], "role": "user"},
        {
            "role": "assistant",
            "content": "<think>a</think>b",
            "tool_calls": [
                {"id": "c1", "function": {"arguments": {"x": 1}, "name": "f"}, "type": "function"}
            ],
        },
        {"content": "ok", "role": "tool", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done"},
    ]


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    parts=st.integers(1, 4),
    seed=st.integers(0, 1000),
    budget=st.integers(200, 900),
    fit=st.sampled_from(["drop", "split"]),
)
def test_tallies_of_any_partition_add_up_to_one_stage(
    qwen3: Path, parts: int, seed: int, budget: int, fit: str
) -> None:
    # What a Ray export does: its sessions' rows counted by several stages, their tallies added
    # up in another; the rows, the stats and what was left out are one stage's.
    from lithify.derive.feedback import FeedbackIndex
    from lithify.derive.sessions import DeriveStats
    from lithify.export import ExportOptions, make_builder
    from lithify.export.pipeline import derive_rows, token_budget

    rng = random.Random(seed)
    facts = [f for s in range(6) for f in agent_session(f"s{s}", rng.randrange(1, 7), seed=seed)]
    options = ExportOptions(
        kind="sft", profile="trl", eval_fraction=0.5, tokenizer=str(qwen3), max_tokens=budget,
        fit=fit,
    )  # fmt: skip
    tok = load_tokenizer(str(qwen3))

    def stage() -> Any:
        builder = make_builder(options)
        return builder, token_budget(options, builder, tok, "x")

    def rows_of(chosen: list[Any], counted: Any, builder: Any) -> list[tuple[str, bytes, bytes]]:
        derived = derive_rows(chosen, FeedbackIndex([], {}), builder, DeriveStats())
        return [(r.split, r.encoded, r.prompt) for r in counted.apply(derived)]

    builder, whole = stage()
    want = rows_of(facts, whole, builder)
    sessions = sorted({f.session_id for f in facts})
    owner = {s: rng.randrange(parts) for s in sessions}
    _, total = stage()
    got: list[tuple[str, bytes, bytes]] = []
    for k in range(parts):
        builder, part = stage()
        got += rows_of([f for f in facts if owner[f.session_id] == k], part, builder)
        total.merge(part.tally())
    assert sorted(got) == sorted(want)
    assert total.left_out == whole.left_out
    # The writer leaves out some eval rows (their prompt is a train row's): any of them.
    left = {prompt for split, _, prompt in want if split == "eval" and rng.random() < 0.5}
    assert total.finish(left) == whole.finish(left)
