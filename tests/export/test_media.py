"""Media and server-tool parts in every profile (docs/export.md, Media and server tools): what
each row holds, what is skipped and why, the image files beside TRL vision rows, and that all of
it is validated, deterministic and replayable."""

from __future__ import annotations

import base64
import hashlib
import random
from pathlib import Path
from typing import Any

import msgspec
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lithify.export.distributed import export_ray
from lithify.export.media import Media, file_name, image_path, mime_of
from lithify.export.pipeline import ExportOptions
from lithify.export.trainer import RowSkip, response_items, trainer_messages
from lithify.model import BlobPart, InferenceCall, Message, TextPart, encode
from tests.export.helpers import (
    BLUE,
    PDF,
    RED,
    SCREEN,
    SEARCH_CALL,
    assistant,
    blob,
    cli_export,
    fact,
    media_sessions,
    png,
    read_rows,
    run_export,
    text,
    user,
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rows(out: Path, split: str = "train") -> list[dict[str, Any]]:
    return read_rows(out / f"{split}.jsonl")


def _by_call(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["source_call_ids"][-1]: r for r in rows}


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


# -- TRL vision rows -----------------------------------------------------------------------------


def test_trl_vision_rows_name_image_files_written_once_beside_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = run_export(media_sessions(), out, kind="sft", profile="trl", images=True)
    rows = _by_call(_rows(out))
    # Written: both vision turns, the session that shows the red image again, both computer
    # turns; each other medium skipped by its reason.
    assert sorted(rows) == ["again", "computer-a", "computer-b", "vision-a", "vision-b"]
    assert s.skipped == {
        "media_reference": 2,  # an image at a URL, an uploaded file id
        "media_unsupported": 1,  # a PDF (TRL vision rows take images)
        "server_tool_unsupported": 1,
    }
    red, blue, screen = (f"images/{_sha(b)}.png" for b in (RED, BLUE, SCREEN))
    # The screenshot a tool returned follows its result as a user message (TRL gives no tool
    # message an image: tests/consumers/test_media.py), counted as the profile's change.
    assert rows["computer-b"]["images"] == [screen]
    assert rows["computer-b"]["messages"][2:4] == [
        {"role": "tool", "name": "computer", "tool_call_id": "cu1",
         "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": [{"type": "image"}]},
    ]  # fmt: skip
    assert s.changes == {"tool_media_as_user": 1}
    assert rows["vision-a"]["images"] == [red]
    assert rows["vision-b"]["images"] == [red, blue]  # in the order the conversation shows them
    assert rows["again"]["images"] == [red]
    assert rows["computer-a"]["images"] == []
    # The files: named by their SHA-256, each once, the bytes the facts hold.
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(
        n.removeprefix("images/") for n in {red, blue, screen}
    )
    for path, data in ((red, RED), (blue, BLUE), (screen, SCREEN)):
        assert (out / path).read_bytes() == data
    # Every content a list of entries; one {"type": "image"} per image, in order.
    msgs = rows["vision-b"]["messages"]
    assert msgs[1] == {
        "role": "user",
        "content": [{"type": "text", "text": "What is this?"}, {"type": "image"}],
    }
    assert msgs[3]["content"] == [{"type": "image"}, {"type": "text", "text": "And this?"}]
    assert msgs[4] == {"role": "assistant", "content": [{"type": "text", "text": "A blue one."}]}
    for r in rows.values():
        shown = sum(1 for m in r["messages"] for c in m["content"] if c == {"type": "image"})
        assert shown == len(r["images"])
        assert all(isinstance(m["content"], list) for m in r["messages"])
    # Nothing inline: no base64 of any image in any row.
    body = (out / "train.jsonl").read_bytes()
    assert base64.b64encode(RED) not in body and base64.b64encode(SCREEN) not in body
    assert rows["vision-a"]["metadata"]["schema"].endswith(".images")


def test_trl_vision_parquet_carries_the_bytes_and_datasets_features(tmp_path: Path) -> None:
    jsonl, parquet = tmp_path / "jsonl", tmp_path / "parquet"
    facts = media_sessions()
    run_export(facts, jsonl, kind="sft", profile="trl", images=True)
    run_export(facts, parquet, kind="sft", profile="trl", images=True, fmt="parquet")
    table = pq.read_table(parquet / "train.parquet")
    assert table.column_names == ["messages", "tools", "images", "metadata"]
    meta = msgspec.json.decode(table.schema.metadata[b"huggingface"])
    assert meta["info"]["features"]["images"] == {"feature": {"_type": "Image"}, "_type": "List"}
    assert not (parquet / "images").exists()  # the bytes are in the rows
    # The card's YAML declares the same features: load_dataset(OUT_DIR) decodes images.
    card = (parquet / "README.md").read_text()
    assert "  - name: images\n    list: image\n" in card.split("---")[1]
    want = _rows(jsonl)
    for got, row in zip(table.to_pylist(), want, strict=True):
        assert [i["path"] for i in got["images"]] == [
            p.removeprefix("images/") for p in row["images"]
        ]
        for image, path in zip(got["images"], row["images"], strict=True):
            assert image["bytes"] == (jsonl / path).read_bytes()
        assert msgspec.json.decode(got["messages"]) == row["messages"]


def test_images_left_only_in_dropped_eval_rows_are_not_written(tmp_path: Path) -> None:
    """An eval row whose prompt is a train prompt is left out; an image only it showed is no
    output of the export."""
    # The same prompt in two sessions, one of which lands in eval.
    facts = [
        fact(
            f"c{i}",
            [Message("user", [blob(png(1, 1, (i, i, i)), "image/png")])],
            [assistant(text("x"))],
            session=f"s{i}",
        )
        for i in range(12)
    ]
    shared = [Message("user", [text("same"), blob(RED, "image/png")])]
    facts += [fact(f"d{i}", shared, [assistant(text("y"))], session=f"t{i}") for i in range(12)]
    out = tmp_path / "out"
    s = run_export(facts, out, kind="sft", profile="trl", images=True, eval_fraction=0.5)
    assert s.skipped.get("eval_prompt_in_train", 0) > 0
    named = {p for split in ("train", "eval") for r in _rows(out, split) for p in r["images"]}
    assert {f"images/{p.name}" for p in (out / "images").iterdir()} == named


def test_images_needs_sft_with_the_trl_profile(tmp_path: Path) -> None:
    for kw in ({"kind": "sft", "profile": "canonical"}, {"kind": "dpo", "profile": "trl"}):
        with pytest.raises(ValueError, match="--images"):
            run_export([], tmp_path, images=True, **kw)


# -- OpenAI fine-tuning ---------------------------------------------------------------------------


def test_openai_rows_carry_images_as_data_urls_or_their_url(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = run_export(media_sessions(), out, kind="sft", profile="openai")
    rows = _by_call(_rows(out))
    assert sorted(rows) == ["again", "computer-a", "computer-b", "uri", "vision-a", "vision-b"]
    assert s.skipped == {
        "media_reference": 1,  # the file id
        "media_unsupported": 1,  # the PDF
        "server_tool_unsupported": 1,
    }
    screen_url = "data:image/png;base64," + base64.b64encode(SCREEN).decode()
    assert rows["computer-b"]["messages"][2:4] == [
        {"role": "tool", "tool_call_id": "cu1", "content": "done"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": screen_url}}]},
    ]
    assert s.changes == {"tool_media_as_user": 1}
    user_msg = rows["vision-a"]["messages"][1]
    red_url = "data:image/png;base64," + base64.b64encode(RED).decode()
    assert user_msg == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": red_url}},
        ],
    }
    # A blob recorded without a MIME type: its type from its bytes.
    blue = rows["vision-b"]["messages"][3]["content"][0]
    assert blue["image_url"]["url"].startswith("data:image/png;base64,")
    assert rows["uri"]["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/cat.png"},
    }
    # Messages without media keep string content.
    assert rows["vision-a"]["messages"][0] == {"role": "system", "content": "Describe images."}


def test_blobs_over_the_inline_limit_are_never_inlined(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = run_export(
        media_sessions(), out, kind="sft", profile="openai", max_inline_bytes=len(RED) - 1
    )
    assert "vision-a" not in _by_call(_rows(out))
    # vision-a, vision-b, again: RED is too large; computer-b: its screenshot is larger still
    assert s.skipped["media_too_large"] == 4
    assert base64.b64encode(RED) not in (out / "train.jsonl").read_bytes()
    gym = tmp_path / "gym"
    s = run_export(
        media_sessions(), gym, kind="nemo-gym", profile="nemo-gym", max_inline_bytes=len(RED) - 1
    )
    assert s.skipped["media_too_large"] >= 2
    for name in ("README.md", "manifest.json", "train.jsonl"):
        assert base64.b64encode(RED) not in (gym / name).read_bytes()


# -- NeMo Gym ------------------------------------------------------------------------------------


def test_nemo_gym_rows_carry_input_image_and_input_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = run_export(media_sessions(), out, kind="nemo-gym", profile="nemo-gym")
    rows = {r["metadata"]["session_id"]: r for r in _rows(out)}
    assert sorted(rows) == ["s-again", "s-computer", "s-pdf", "s-uri", "s-vision"]
    # NeMo Gym 0.4.0 has no item for a server tool (tests/consumers/test_nemo_gym.py shows its
    # validator refusing them); a computer call's screenshot follows its output as user input.
    assert s.skipped == {"media_reference": 1, "server_tool_unsupported": 1}
    assert s.changes == {"tool_media_as_user": 1}
    computer = rows["s-computer"]["recorded_output"]
    assert [i["type"] for i in computer] == [
        "function_call", "function_call_output", "message", "message"
    ]  # fmt: skip
    assert computer[2] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "detail": "auto",
                     "image_url": "data:image/png;base64," + base64.b64encode(SCREEN).decode()}],
    }  # fmt: skip
    first = rows["s-vision"]["responses_create_params"]["input"][1]
    assert first == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {
                "type": "input_image",
                "detail": "auto",
                "image_url": "data:image/png;base64," + base64.b64encode(RED).decode(),
            },
        ],
    }
    later = rows["s-vision"]["recorded_output"][1]
    assert later["content"][0]["type"] == "input_image"
    pdf = rows["s-pdf"]["responses_create_params"]["input"][0]["content"][1]
    assert pdf == {
        "type": "input_file",
        "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
        "filename": f"{_sha(PDF)}.pdf",
    }
    uri = rows["s-uri"]["responses_create_params"]["input"][0]["content"][1]
    assert uri == {
        "type": "input_image",
        "detail": "auto",
        "image_url": "https://example.com/cat.png",
    }


def test_canonical_segment_rows_carry_media_parts_after_the_first_input(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = run_export(media_sessions(), out, kind="nemo-gym")
    rows = {r["metadata"]["session_id"]: r for r in _rows(out)}
    # Every session is a row: media and server tools anywhere, the starting input too
    # (nemo-gym-responses-create-params.v3.json), each row validated against it.
    assert s.skipped == {}
    assert sorted(rows) == sorted({f.session_id for f in media_sessions()})
    start = rows["s-vision"]["responses_create_params"]["input"][-1]["parts"]
    assert [p["type"] for p in start] == ["text", "blob"] and start[1]["sha256"] == _sha(RED)
    (turn,) = rows["s-computer"]["turns"][1]["messages"]
    assert turn["parts"][1]["type"] == "blob" and turn["parts"][1]["sha256"] == _sha(SCREEN)
    output = rows["s-search"]["turns"][0]["output"]
    assert [p["type"] for p in output["parts"]] == [
        "server_tool_call",
        "server_tool_call_response",
        "text",
    ]
    assert output["parts"][0]["server_tool_call"] == SEARCH_CALL


# -- the other profiles -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["canonical", "trl", "axolotl"])
def test_text_profiles_skip_media_and_server_tools_by_reason(tmp_path: Path, profile: str) -> None:
    out = tmp_path / "out"
    s = run_export(media_sessions(), out, kind="sft", profile=profile)
    assert sorted(_by_call(_rows(out))) == ["computer-a"]
    # A file id can go nowhere (media_reference); these profiles have no place for any medium.
    assert s.skipped == {
        "media_reference": 1,
        "media_unsupported": 6,
        "server_tool_unsupported": 1,
    }


def test_a_reference_recorded_without_a_part_still_skips_the_call(tmp_path: Path) -> None:
    """``content_reference`` counts a reference a source kept no part for: that call lost
    content, and stays a degraded fact."""
    lost = fact(
        "lost",
        [user("See the file.")],
        [assistant(text("ok"))],
        session="s",
        degradations={"content_reference": 1},
    )
    s = run_export([lost], tmp_path / "out", kind="sft", profile="openai")
    assert s.skipped == {"degraded_fact": 1}


# -- message mapping, properties ---------------------------------------------------------------------

_MEDIA = st.sampled_from(
    [
        blob(RED, "image/png"),
        blob(BLUE, None, "image"),
        blob(PDF, "application/pdf"),
        blob(b"RIFF....WAVEfmt ", "audio/wav"),
    ]
)
_PART = st.one_of(st.builds(TextPart, st.text(max_size=5)), _MEDIA)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(_PART, max_size=6),
    mode=st.sampled_from(["images", "openai", "responses", "none"]),
)
def test_media_map_faithfully_or_skip(parts: list[Any], mode: str) -> None:
    """Every medium is in the message, in order, or the row is skipped with a media reason."""
    media = Media(mode)
    images: list[BlobPart] = []
    msg = Message("user", parts)
    try:
        if mode == "responses":
            content = response_items([msg], "seed", None, media)[0]["content"]
        else:
            content = trainer_messages([msg], {}, media, images)[0]["content"]
    except RowSkip as e:
        assert e.reason in ("media_unsupported", "media_reference")
        assert any(isinstance(p, BlobPart) for p in parts)
        return
    blobs = [p for p in parts if isinstance(p, BlobPart)]
    texts = "".join(p.content for p in parts if isinstance(p, TextPart))
    if isinstance(content, str):
        assert not blobs and content == texts
        return
    assert "".join(c.get("text", "") for c in content) == texts
    media_entries = [c for c in content if c["type"] not in ("text", "input_text")]
    assert len(media_entries) == len(blobs)
    if mode == "images":
        assert images == blobs
    for entry, b in zip(media_entries, blobs, strict=True):
        if mode == "openai":
            assert entry["image_url"]["url"].endswith(b.content)
        elif mode == "responses":
            assert (entry.get("image_url") or entry["file_data"]).endswith(b.content)


def test_file_names_follow_the_bytes() -> None:
    assert file_name(blob(RED, None, "image")) == f"{_sha(RED)}.png"  # sniffed
    assert file_name(blob(RED, "image/jpeg")) == f"{_sha(RED)}.jpg"  # as recorded
    assert image_path(blob(PDF, "application/pdf")) == f"images/{_sha(PDF)}.pdf"
    assert mime_of(blob(b"\xff\xd8\xff\xe0rest", None)) == "image/jpeg"
    assert mime_of(blob(b"plain", None)) is None


# -- determinism, manifest, replay, engines -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_same_facts_in_any_order_give_the_same_bytes(tmp_path: Path, fmt: str) -> None:
    facts = media_sessions()
    trees = []
    for seed in range(3):
        shuffled = list(facts)
        random.Random(seed).shuffle(shuffled)
        out = tmp_path / f"out-{seed}"
        run_export(
            shuffled, out, kind="sft", profile="trl", images=True, fmt=fmt, eval_fraction=0.5
        )
        trees.append(_tree(out))
    assert trees[0] == trees[1] == trees[2]
    assert any(k.startswith("images/") for k in trees[0]) == (fmt == "jsonl")


def test_the_manifest_hashes_the_image_files_and_a_replay_checks_them(tmp_path: Path) -> None:
    facts_file = tmp_path / "facts.jsonl"
    facts_file.write_bytes(b"".join(encode(f) + b"\n" for f in media_sessions()))
    out = tmp_path / "out"
    cli_export("sft", "--profile", "trl", "--images", "--facts", str(facts_file), "-o", str(out))
    manifest = msgspec.json.decode((out / "manifest.json").read_bytes())
    images = {k: v for k, v in manifest["files"].items() if k.startswith("images/")}
    assert len(images) == 3  # red, blue and the screenshot
    for name, entry in images.items():
        data = (out / name).read_bytes()
        assert entry["sha256"] == _sha(data) and entry["bytes"] == len(data)
    assert "--images" in manifest["provenance"]["command"]
    card = (out / "README.md").read_text()
    assert "`images`" in card

    from click.testing import CliRunner

    from lithify.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert res.exit_code == 0, res.output
    result = msgspec.json.decode(res.stdout)
    assert {c["name"] for c in result["files"]} >= set(images)
    # An image changed in the folder since: the replay says which.
    victim = sorted(images)[0]
    (out / victim).write_bytes(b"not the image")
    res = runner.invoke(app, ["export", "--replay", str(out / "manifest.json"), "--json"])
    assert res.exit_code == 7
    bad = [c["name"] for c in msgspec.json.decode(res.stdout)["files"] if not c["same"]]
    assert bad == [victim]


def test_text_exports_are_unchanged_by_media_support(tmp_path: Path) -> None:
    """A fact without media parts makes the rows it made before (its schema id included)."""
    f: InferenceCall = fact("t", [user("hi")], [assistant(text("hello"))], session="s")
    out = tmp_path / "out"
    run_export([f], out, kind="sft", profile="trl")
    (row,) = _rows(out)
    assert row["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert "images" not in row
    assert (
        row["metadata"]["schema"]
        == "urn:lithify:schemas:rows:sft.messages:v1:trl.reasoning_content.object"
    )


@pytest.mark.xdist_group("ray")  # the process's one cluster (tests/scale/cluster.py)
def test_the_ray_engine_makes_the_same_bytes_for_media_rows(
    tmp_path: Path, ray_joined: tuple[str, dict[str, str]]
) -> None:
    """OpenAI and NeMo Gym rows carry their media inline (data URLs): the Ray engine makes them
    byte for byte as the local engine does (docs/scale.md), on a real two-node cluster."""
    from lithify.export import export, from_files
    from lithify.store import FactFilter

    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b"".join(encode(f) + b"\n" for f in media_sessions()))
    for kind, profile in (("sft", "openai"), ("nemo-gym", "nemo-gym")):
        options = ExportOptions(kind=kind, profile=profile, eval_fraction=0.5)
        local = export(from_files([facts], FactFilter()), tmp_path / kind, options)
        out = tmp_path / f"ray-{kind}"
        export_ray([facts], out, options, partitions=3)
        assert local.rows["train"] + local.rows["eval"] > 0
        for name in ("train.jsonl", "eval.jsonl"):
            assert (out / name).read_bytes() == (tmp_path / kind / name).read_bytes()


_USER_PART = st.sampled_from(
    [
        text("look"),
        blob(RED, "image/png"),
        blob(BLUE, None, "image"),
        blob(PDF, "application/pdf"),
        blob(png(1, 2, (1, 2, 3)), "image/gif"),  # a GIF type on PNG bytes: OpenAI takes no GIF
    ]
)


@settings(max_examples=25, deadline=None)
@given(
    calls=st.lists(st.lists(_USER_PART, min_size=1, max_size=4), min_size=1, max_size=5),
    profile=st.sampled_from(["trl-images", "openai", "nemo-gym", "trl"]),
)
def test_every_call_is_a_row_or_a_counted_skip(
    tmp_path_factory: pytest.TempPathFactory, calls: list[list[Any]], profile: str
) -> None:
    """One single-turn session per call: each gives a valid row (every export validates its
    rows) holding each of its media once, or is counted under one skip reason."""
    facts = [
        fact(f"c{i}", [Message("user", parts)], [assistant(text("ok"))], session=f"s{i}")
        for i, parts in enumerate(calls)
    ]
    out = tmp_path_factory.mktemp("rows")
    kw: dict[str, Any] = {"kind": "sft", "profile": profile}
    if profile == "trl-images":
        kw = {"kind": "sft", "profile": "trl", "images": True}
    elif profile == "nemo-gym":
        kw = {"kind": "nemo-gym", "profile": "nemo-gym"}
    s = run_export(facts, out, **kw)
    assert sum(s.rows.values()) + sum(s.skipped.values()) == len(facts)
    body = (out / "train.jsonl").read_bytes()
    for r in _rows(out):
        i = int(r["metadata"]["source_call_ids"][0][1:])
        blobs = [p for p in calls[i] if isinstance(p, BlobPart)]
        if profile == "trl-images":
            assert r["images"] == [image_path(b) for b in blobs]
        else:
            for b in blobs:
                assert body.count(b.content.encode()) >= 1


def test_an_export_without_images_removes_an_earlier_exports_images(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_export(media_sessions(), out, kind="sft", profile="trl", images=True)
    assert (out / "images").is_dir()
    run_export(media_sessions(), out, kind="sft", profile="openai")
    assert not (out / "images").exists()
    manifest = msgspec.json.decode((out / "manifest.json").read_bytes())
    assert not [k for k in manifest["files"] if k.startswith("images/")]


def test_a_server_tool_call_alone_is_no_empty_target(tmp_path: Path) -> None:
    """A turn whose output only asks the provider's tool is something the model said."""
    from lithify.model import ServerToolCallPart

    only = Message("assistant", [ServerToolCallPart("ws_1", "web_search", SEARCH_CALL)], "stop")
    f = fact("s", [user("Who won?")], [only], session="s")
    out = tmp_path / "out"
    s = run_export([f], out, kind="nemo-gym")
    assert s.rows == {"train": 1, "eval": 0} and "empty_target" not in s.flags


def test_a_non_finite_number_in_a_server_tool_skips_the_canonical_row(tmp_path: Path) -> None:
    """JSON has no NaN (orjson would write null): the row is skipped by its reason, not bent."""
    import math

    from lithify.model import ServerToolCallPart, ServerToolCallResponsePart

    searched = Message("assistant", [
        ServerToolCallPart("ws", "web_search", {"type": "web_search_call", "score": math.nan}),
        ServerToolCallResponsePart("ws", {"type": "web_search_result"}),
        text("Found it."),
    ])  # fmt: skip
    facts = [fact("nan", [user("Search.")], [searched], session="s-nan")]
    s = run_export(facts, tmp_path / "out", kind="nemo-gym")
    assert s.skipped == {"unrepresentable_value": 1} and s.rows["train"] == 0
