"""Token budgets (docs/export.md, Token budgets): every row's count is what the tokenizer's own
``apply_chat_template(..., tokenize=True)`` gives for the row as written, with the Qwen3 and
Llama 3.1 templates, for every profile that has chat messages; rows over ``--max-tokens`` are
dropped or cut at a turn boundary; the summary, manifest and card report the counts; exports
stay byte-identical in any fact order and replay."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import transformers  # noqa: F401  (the test extra installs it: lithify[tokens])
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.cli import app
from lithify.export import ExportOptions, make_builder
from lithify.export.rows import prompt_digest, split_of
from lithify.export.tokens import TokenizerError, load_tokenizer, percentile
from lithify.export.validate import RowValidator
from lithify.model import Feedback, InferenceCall, Message, encode
from tests.export.helpers import (
    assistant,
    call,
    export_files,
    fact,
    feedback,
    read_rows,
    replay,
    run_export,
    segment,
    system,
    text,
    think,
    tool,
    tool_session,
    user,
)

TEMPLATES = Path(__file__).parent / "chat_templates"  # copied from TRL: SOURCES.md there
BOS, EOS, PAD = "<|bos|>", "<|im_end|>", "<|pad|>"
runner = CliRunner()


def build_tokenizer(template: str, folder: Path, added: tuple[str, ...] = ()) -> Path:
    """A small BPE tokenizer trained here (nothing downloaded) with ``template`` as its chat
    template, saved as a model folder is: ``AutoTokenizer`` loads it as it loads a real one.
    ``added``: more special tokens (a real model's ``<|im_start|>``, vision markers…)."""
    from tokenizers import Tokenizer, decoders, models, trainers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    source = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[BOS, EOS, PAD, *added],
        initial_alphabet=ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([source, " ".join(WORDS)] * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )
    fast.chat_template = source
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["qwen3", "llama3_1"])
def tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer("qwen3", tmp_path_factory.mktemp("qwen3"))


WORDS = (
    "the agent looks up the order reads the result and answers with the shipping status "
    "carrier tracking number refund policy warehouse weather Paris sunny cloudy"
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def agent_session(
    sid: str, rounds: int, *, seed: int = 0, size: int = 12, users: frozenset[int] = frozenset()
) -> list[InferenceCall]:
    """A tool loop: a system message and a task, then ``rounds`` calls each making one tool call
    whose result the next call replays (a new user message before the rounds in ``users``),
    then an answer. One tool call per message: Llama 3.1's template renders no more."""
    rng = random.Random(f"{sid}:{seed}")
    inputs: list[Message] = [system("You are an agent. " + words(rng, 4)), user(words(rng, size))]
    out: list[InferenceCall] = []
    for r in range(rounds + 1):
        if r == rounds:
            output = assistant(think(words(rng, size)), text(words(rng, size)))
        else:
            output = assistant(
                think(words(rng, size // 2 + 1)),
                call(f"{sid}-c{r}", city=words(rng, 2)),
                finish="tool_call",
            )
        out.append(fact(f"{sid}-{r:03d}", list(inputs), [output], session=sid, second=r))
        if r < rounds:
            inputs = [*inputs, replay(output), tool(f"{sid}-c{r}", {"note": words(rng, size)})]
            if r + 1 in users:
                inputs.append(user(words(rng, size // 2 + 1)))
    return out


def preference_facts() -> tuple[list[InferenceCall], list[Feedback]]:
    """Two answers to one prompt, scored apart (a DPO pair), and an agent session with a
    reward (an RL row)."""
    prompt = [system("Be brief."), user("Weather in Paris?")]
    good = fact("p-good", prompt, [assistant(think("Check."), text("Sunny, 21 C."))], session="p1")
    bad = fact("p-bad", prompt, [assistant(text("It is weather."))], session="p2")
    facts = [good, bad, *agent_session("r1", 3)]
    fb = [feedback("p-good", 0.9), feedback("p-bad", 0.1), feedback("r1", 1.0, kind="session")]
    return facts, fb


def facts_and_feedback() -> tuple[list[InferenceCall], list[Feedback]]:
    facts, fb = preference_facts()
    facts += tool_session("t1") + agent_session("a1", 4, users=frozenset({2}))
    return facts, fb


# (kind, profile, shape): every row shape of chat messages, in every profile that has it.
COUNTED = [
    ("sft", "canonical", None),
    ("sft", "trl", None),
    ("sft", "axolotl", None),
    ("sft", "openai", None),
    ("sft", "canonical", "prompt-completion"),
    ("sft", "trl", "prompt-completion"),
    ("dpo", "canonical", None),
    ("dpo", "trl", None),
    ("dpo", "openai", None),
    ("rl", "trl", None),
]


def reference_count(tok: Any, row: dict[str, Any]) -> int:
    """The row's length as the trainer tokenizes it, computed here from the row alone: the
    chat template on each sequence the trainer makes of it (TRL: prompt + completion, prompt +
    chosen / rejected; the longer counts), the row's tools as written."""

    def n(messages: list[dict[str, Any]], tools: Any) -> int:
        ids = tok.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True)
        return len(ids["input_ids"])

    if "messages" in row:
        return n(row["messages"], row["tools"])
    if "completion" in row:
        return n(row["prompt"] + row["completion"], row["tools"])
    if "chosen" in row:
        return max(n(row["prompt"] + row[k], row["tools"]) for k in ("chosen", "rejected"))
    inp = row["input"]
    return max(
        n(inp["messages"] + row[k], inp["tools"])
        for k in ("preferred_output", "non_preferred_output")
    )


def without_tokens(row: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in row["metadata"].items() if k not in ("tokens", "context_cut")}
    return {**row, "metadata": meta}


@pytest.mark.parametrize(("kind", "profile", "shape"), COUNTED)
def test_every_count_is_the_tokenizers_own(
    tokenizer: Path, kind: str, profile: str, shape: str | None, tmp_path: Path
) -> None:
    facts, fb = facts_and_feedback()
    plain = run_export(facts, tmp_path / "plain", fb, kind=kind, profile=profile, shape=shape)
    summary = run_export(
        facts,
        tmp_path / "out",
        fb,
        kind=kind,
        profile=profile,
        shape=shape,
        tokenizer=str(tokenizer),
    )
    rows = read_rows(tmp_path / "out" / "train.jsonl")
    assert rows, "the profile must make rows to count"
    tok = load_tokenizer(str(tokenizer))
    counts = [row["metadata"]["tokens"] for row in rows]
    assert counts == [reference_count(tok, without_tokens(r)) for r in rows]
    # Counting changes nothing else: the same rows, each with its count.
    assert [without_tokens(r) for r in rows] == read_rows(tmp_path / "plain" / "train.jsonl")
    assert summary.rows == plain.rows
    validator = RowValidator(
        kind,
        summary.shape,
        make_builder(ExportOptions(kind=kind, profile=profile, shape=shape)).profile,
    )
    for row in rows:
        validator.check(row, row["metadata"]["source_call_ids"])
    stats = summary.tokens
    assert not isinstance(stats, type(None))
    assert stats.rows == len(rows)
    ordered = sorted(counts)
    assert (stats.min, stats.max) == (ordered[0], ordered[-1])
    assert stats.median == ordered[(len(ordered) + 1) // 2 - 1]
    assert stats.p95 == ordered[-(-95 * len(ordered) // 100) - 1]


def test_tools_are_counted_as_the_trainer_passes_them(tmp_path: Path) -> None:
    # TRL's SFT and DPO trainers pass the tools column as it is: Llama 3.1's template renders
    # its tool preamble for an empty list too, so a row without tools still carries it.
    folder = build_tokenizer("llama3_1", tmp_path / "llama")
    facts = [fact("x", [user("Hi?")], [assistant(text("Hello."))], session="s", tools=[])]
    run_export(facts, tmp_path / "out", kind="sft", profile="trl", tokenizer=str(folder))
    [row] = read_rows(tmp_path / "out" / "train.jsonl")
    assert row["tools"] == []
    tok = load_tokenizer(str(folder))
    messages = row["messages"]
    with_list = len(tok.apply_chat_template(messages, tools=[], tokenize=True)["input_ids"])
    with_none = len(tok.apply_chat_template(messages, tools=None, tokenize=True)["input_ids"])
    assert row["metadata"]["tokens"] == with_list > with_none


def _sft_rows(folder: Path) -> list[dict[str, Any]]:
    return [*read_rows(folder / "train.jsonl"), *read_rows(folder / "eval.jsonl")]


def test_rows_over_the_budget_are_dropped_and_counted(qwen3: Path, tmp_path: Path) -> None:
    facts = agent_session("a", 8) + agent_session("b", 2)
    full = run_export(facts, tmp_path / "full", kind="sft", profile="trl", tokenizer=str(qwen3))
    counts = [r["metadata"]["tokens"] for r in _sft_rows(tmp_path / "full")]
    budget = sorted(counts)[len(counts) // 2]
    summary = run_export(
        facts, tmp_path / "cut", kind="sft", profile="trl", tokenizer=str(qwen3), max_tokens=budget
    )
    kept = _sft_rows(tmp_path / "cut")
    assert kept == [r for r in _sft_rows(tmp_path / "full") if r["metadata"]["tokens"] <= budget]
    assert summary.skipped["over_token_budget"] == sum(n > budget for n in counts) > 0
    assert sum(summary.rows.values()) + summary.skipped["over_token_budget"] == sum(
        full.rows.values()
    )
    assert summary.tokens and summary.tokens.max is not None and summary.tokens.max <= budget


def _check_split(
    full: list[dict[str, Any]], cut: list[dict[str, Any]], budget: int, over: int
) -> None:
    """What --fit split promises, row by row against the uncut export."""
    by_target = {(r["metadata"]["segment_id"], r["metadata"]["turn"]): r for r in full}
    targets = [(r["metadata"]["segment_id"], r["metadata"]["turn"]) for r in cut]
    assert len(set(targets)) == len(targets)  # one row per target, as before the cut
    assert len(cut) + over == len(full)  # every target is a row, or counted
    for row in cut:
        meta = row["metadata"]
        assert meta["tokens"] <= budget
        whole = by_target[(meta["segment_id"], meta["turn"])]
        if "context_cut" not in meta:
            assert without_tokens(row) == without_tokens(whole)
            continue
        n = meta["context_cut"]
        msgs, orig = row["messages"], whole["messages"]
        head = 0
        while orig[head]["role"] in ("system", "developer"):
            head += 1
        assert msgs[-1] == orig[-1]  # the target, untouched
        assert msgs[:head] == orig[:head]  # the system message kept
        assert msgs[head:] == orig[head + n :]  # then a tail of the rest, nothing else cut
        assert msgs[head]["role"] in ("user", "assistant")  # a turn boundary
        called = set()
        for m in msgs:  # no tool result lost its call
            called |= {c["id"] for c in m.get("tool_calls", ())}
            if m["role"] == "tool":
                assert m["tool_call_id"] in called


def test_split_cuts_long_rows_at_turn_boundaries(qwen3: Path, tmp_path: Path) -> None:
    facts = agent_session("a", 12, users=frozenset({5})) + agent_session("b", 3)
    run_export(facts, tmp_path / "full", kind="sft", profile="trl", tokenizer=str(qwen3))
    full = _sft_rows(tmp_path / "full")
    counts = sorted(r["metadata"]["tokens"] for r in full)
    budget = counts[len(counts) // 3]
    summary = run_export(
        facts,
        tmp_path / "cut",
        kind="sft",
        profile="trl",
        tokenizer=str(qwen3),
        max_tokens=budget,
        fit="split",
    )
    cut = _sft_rows(tmp_path / "cut")
    _check_split(full, cut, budget, summary.skipped.get("over_token_budget", 0))
    assert summary.tokens and summary.tokens.cut == sum("context_cut" in r["metadata"] for r in cut)
    assert summary.tokens.cut > 0


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rounds=st.integers(0, 9),
    size=st.integers(1, 30),
    users=st.frozensets(st.integers(1, 9), max_size=3),
    seed=st.integers(0, 1000),
    share=st.integers(5, 100),
    shape=st.sampled_from(["messages", "prompt-completion"]),
)
def test_split_property(
    qwen3: Path,
    tmp_path_factory: pytest.TempPathFactory,
    rounds: int,
    size: int,
    users: frozenset[int],
    seed: int,
    share: int,
    shape: str,
) -> None:
    tmp = tmp_path_factory.mktemp("split")
    facts = agent_session("p", rounds, seed=seed, size=size, users=users)
    opts: dict[str, Any] = {"kind": "sft", "profile": "trl", "shape": shape}
    run_export(facts, tmp / "full", tokenizer=str(qwen3), **opts)
    full = _sft_rows(tmp / "full")
    counts = sorted(r["metadata"]["tokens"] for r in full)
    budget = max(1, counts[-1] * share // 100)
    summary = run_export(
        facts, tmp / "cut", tokenizer=str(qwen3), max_tokens=budget, fit="split", **opts
    )
    cut = _sft_rows(tmp / "cut")
    if shape == "prompt-completion":  # the same checks on prompt + completion as one list
        full = [{**r, "messages": r["prompt"] + r["completion"]} for r in full]
        cut = [{**r, "messages": r["prompt"] + r["completion"]} for r in cut]
    _check_split(full, cut, budget, summary.skipped.get("over_token_budget", 0))


def test_same_facts_any_order_same_bytes(qwen3: Path, tmp_path: Path) -> None:
    facts, fb = facts_and_feedback()
    facts += agent_session("z", 10) + agent_session("y", 6)
    opts: dict[str, Any] = {
        "kind": "sft",
        "profile": "trl",
        "eval_fraction": 0.5,
        "tokenizer": str(qwen3),
        "max_tokens": 700,
        "fit": "split",
    }
    run_export(facts, tmp_path / "a", fb, **opts)
    shuffled = list(facts)
    random.Random(7).shuffle(shuffled)
    run_export(shuffled, tmp_path / "b", fb[::-1], **opts)
    assert export_files(tmp_path / "a") == export_files(tmp_path / "b")


def test_cut_rows_are_compared_by_their_own_prompt(qwen3: Path, tmp_path: Path) -> None:
    # The prompt digest a builder computes as rows grow is the one of the lists alone.
    builder = make_builder(ExportOptions(kind="sft", profile="trl", eval_fraction=0.5))
    calls = agent_session("d", 3)
    rows = list(builder.rows(segment(*calls, session="d")))
    assert rows
    for row in rows:
        assert row.prompt == prompt_digest(row.data["messages"][:-1], row.data["tools"])


def _session_in(split: str, prefix: str) -> str:
    return next(f"{prefix}{i}" for i in range(1000) if split_of(f"{prefix}{i}", 0.5) == split)


def test_stats_leave_out_eval_rows_the_writer_leaves_out(qwen3: Path, tmp_path: Path) -> None:
    # The same exact prompt in a train session and an eval session: the eval row is not written
    # (eval_prompt_in_train), so its count is not in the distribution.
    train, evals = _session_in("train", "t"), _session_in("eval", "e")
    prompt = [user("Weather in Paris?")]
    facts = [
        fact("c-train", prompt, [assistant(text("Sunny."))], session=train),
        fact("c-eval", prompt, [assistant(text("Sunny and warm today, 21 C."))], session=evals),
    ]
    summary = run_export(
        facts, tmp_path / "o", kind="sft", profile="trl", eval_fraction=0.5, tokenizer=str(qwen3)
    )
    assert summary.skipped == {"eval_prompt_in_train": 1}
    [row] = read_rows(tmp_path / "o" / "train.jsonl")
    assert summary.tokens is not None
    assert summary.tokens.rows == 1
    assert summary.tokens.min == summary.tokens.max == row["metadata"]["tokens"]


def test_a_template_that_fails_on_a_row_skips_it_counted(tmp_path: Path) -> None:
    # Llama 3.1's template renders one tool call per message and raises on two.
    folder = build_tokenizer("llama3_1", tmp_path / "llama")
    both = assistant(call("c1", city="Paris"), call("c2", city="Rome"), finish="tool_call")
    facts = [
        fact("two", [user("Paris and Rome?")], [both], session="s1"),
        fact("one", [user("Paris?")], [assistant(text("Sunny."))], session="s2"),
    ]
    summary = run_export(facts, tmp_path / "o", kind="sft", profile="trl", tokenizer=str(folder))
    assert summary.skipped["chat_template_error"] == 1
    assert summary.rows["train"] == 1


# -- the command line: summary, manifest, card, replay, usage errors ----------------------------


def _facts_file(tmp_path: Path) -> Path:
    facts, fb = facts_and_feedback()
    lines = [encode(f) for f in [*facts, *fb]]
    path = tmp_path / "facts.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_cli_summary_manifest_card_and_replay(qwen3: Path, tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    out = tmp_path / "out"
    args = ["export", "sft", "--profile", "trl", "--facts", str(facts), "-o", str(out)]
    args += ["--tokenizer", str(qwen3), "--max-tokens", "800", "--fit", "split"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    summary = orjson.loads(res.stdout)
    tokens = summary["tokens"]
    counts = sorted(r["metadata"]["tokens"] for r in _sft_rows(out))
    assert tokens["rows"] == len(counts) == sum(summary["rows"].values())
    assert (tokens["min"], tokens["max"]) == (counts[0], counts[-1])
    assert tokens["max_tokens"] == 800 and tokens["fit"] == "split"
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["tokens"] == tokens
    assert manifest["options"]["tokenizer"] == str(qwen3.absolute())
    assert ["--tokenizer", str(qwen3.absolute())] == manifest["provenance"]["command"][
        manifest["provenance"]["command"].index("--tokenizer") : manifest["provenance"][
            "command"
        ].index("--tokenizer")
        + 2
    ]
    card = (out / "README.md").read_text()
    assert "## Token budget" in card and tokens["sha256"] in card
    assert f"| median | {tokens['median']} |" in card
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "tokens: p95" in table.output
    again = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout)["identical"] is True


def test_without_a_tokenizer_nothing_changes(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0
    manifest = orjson.loads((tmp_path / "o" / "manifest.json").read_bytes())
    assert "tokens" not in manifest
    assert "tokens" not in read_rows(tmp_path / "o" / "train.jsonl")[0]["metadata"]
    assert "Token budget" not in (tmp_path / "o" / "README.md").read_text()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--max-tokens", "10"], "--max-tokens needs --tokenizer"),
        (["--tokenizer", "x", "--fit", "cut"], "--fit must be one of"),
        (["--tokenizer", "x", "--max-tokens", "0"], "--max-tokens must be 1 or more"),
        (["--tokenizer", "x", "--fit", "split"], "--fit split needs --max-tokens"),
    ],
)
def test_token_options_that_do_not_fit_are_usage_errors(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    facts = _facts_file(tmp_path)
    res = runner.invoke(app, ["export", "sft", "--facts", str(facts), *extra])
    assert res.exit_code == 2
    assert said in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("kind", "profile"),
    [("dpo", "trl"), ("rl", "canonical"), ("rl", "nemo-gym"), ("nemo-gym", "nemo-gym")],
)
def test_only_sft_rows_are_cut_to_fit(tmp_path: Path, kind: str, profile: str) -> None:
    facts = _facts_file(tmp_path)
    args = ["export", kind, "--profile", profile, "--facts", str(facts), "--tokenizer", "x"]
    res = runner.invoke(app, [*args, "--max-tokens", "9", "--fit", "split"])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert "--fit split cuts SFT rows only" in said and "--fit drop" in said


def test_a_name_not_in_the_local_cache_is_a_usage_error(tmp_path: Path) -> None:
    facts = _facts_file(tmp_path)
    out = tmp_path / "o"
    res = runner.invoke(
        app, ["export", "sft", "--facts", str(facts), "-o", str(out), "--tokenizer", "nobody/none"]
    )
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert "no tokenizer 'nobody/none'" in said and "never downloaded" in said
    assert not out.exists()  # refused before anything was written


def test_without_the_extra_the_error_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qwen3: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers fails
    with pytest.raises(TokenizerError, match=r"lithify\[tokens\]"):
        load_tokenizer(str(qwen3))
    facts = _facts_file(tmp_path)
    res = runner.invoke(
        app,
        [
            "export",
            "sft",
            "--facts",
            str(facts),
            "--tokenizer",
            str(qwen3),
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 2
    assert "pip install 'lithify[tokens]'" in " ".join(res.output.split())


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path: Path, qwen3: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(qwen3), local_files_only=True)
    tok.chat_template = None
    (tmp_path / "bare").mkdir()
    tok.save_pretrained(tmp_path / "bare")
    for name in ("chat_template.jinja", "chat_template.json"):
        (tmp_path / "bare" / name).unlink(missing_ok=True)
    with pytest.raises(TokenizerError, match="no chat template"):
        load_tokenizer(str(tmp_path / "bare"))


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 100))
def test_percentile_is_the_nearest_rank(values: list[int], percent: int) -> None:
    got = percentile(Counter(values), percent)
    if not values:
        assert got is None
        return
    ordered = sorted(values)
    # The smallest value that at least percent% of the values do not exceed.
    want = next(v for v in ordered if sum(x <= v for x in values) * 100 >= percent * len(values))
    assert got == want


def test_the_new_skip_reasons_are_documented() -> None:
    from lithify.export import SKIP_REASONS

    doc = (Path(__file__).parents[2] / "docs" / "export.md").read_text()
    for reason in ("over_token_budget", "chat_template_error"):
        assert reason in SKIP_REASONS
        assert f"| `{reason}` |" in doc
    assert "## Token budgets" in doc


def test_a_name_in_the_local_cache_is_loaded_from_it(qwen3: Path, tmp_path: Path) -> None:
    # The cache's own layout (models--OWNER--NAME/snapshots/REVISION, refs/main naming it), in a
    # fresh process: huggingface_hub reads where its cache is when it is imported.
    import os
    import shutil
    import subprocess

    repo = tmp_path / "hub" / "models--local--tiny-qwen3"
    shutil.copytree(qwen3, repo / "snapshots" / ("0" * 40))
    # A model repo has its config: AutoTokenizer reads it for a name (not for a folder).
    (repo / "snapshots" / ("0" * 40) / "config.json").write_text('{"model_type": "qwen3"}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    facts = _facts_file(tmp_path)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    args = [str(Path(sys.executable).parent / "lithify"), "export", "sft", "--profile", "trl"]
    args += ["--facts", str(facts), "-o", str(tmp_path / "o"), "--json"]
    by_name = subprocess.run(
        [*args, "--tokenizer", "local/tiny-qwen3"], env=env, capture_output=True, check=True
    )
    by_folder = run_export(
        [], tmp_path / "unused", kind="sft", profile="trl", tokenizer=str(qwen3)
    ).tokens
    tokens = orjson.loads(by_name.stdout)["tokens"]
    assert tokens["tokenizer"] == "local/tiny-qwen3"
    assert by_folder is not None and tokens["sha256"] == by_folder.sha256  # the same tokenizer


def test_the_counts_are_trls_own(tmp_path: Path) -> None:
    # The trainers themselves, in the TRL consumer venv (docs/consumers.md): SFTTrainer's and
    # DPOTrainer's prepared sequences are as long as metadata.tokens says, row by row, with the
    # Qwen3 and Llama 3.1 templates (Llama's tool preamble for an empty tools list included).
    import subprocess

    from tests.consumers.pipeline import _missing, consumer_python

    missing = _missing("trl")
    if missing is not None:  # scripts/test builds the venv: its absence is a failure
        pytest.fail(missing)
    facts, fb = facts_and_feedback()
    facts += agent_session("long", 6, users=frozenset({3}))
    facts.append(fact("bare", [user("Hi?")], [assistant(text("Hello."))], session="b", tools=[]))
    specs, want = [], []
    for template in ("qwen3", "llama3_1"):
        folder = build_tokenizer(template, tmp_path / template)
        for kind, shape in (("sft", None), ("sft", "prompt-completion"), ("dpo", None)):
            out = tmp_path / f"{template}-{kind}-{shape}"
            run_export(facts, out, fb, kind=kind, profile="trl", shape=shape, tokenizer=str(folder))
            rows = read_rows(out / "train.jsonl")
            assert rows
            specs.append({"tokenizer": str(folder), "path": str(out / "train.jsonl"), "kind": kind})
            want.append([r["metadata"]["tokens"] for r in rows])
    spec = tmp_path / "spec.json"
    spec.write_bytes(orjson.dumps(specs))
    script = Path(__file__).with_name("trl_lengths.py")
    report = tmp_path / "report.json"
    subprocess.run(
        [str(consumer_python("trl")), str(script), str(spec), str(report)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert orjson.loads(report.read_bytes()) == want
