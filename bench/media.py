"""Benchmark: a computer-use session's screenshots in the store (docs/store.md, Blobs).

    .venv/bin/python bench/media.py                        # 50 turns, 200 KB, both backends
    .venv/bin/python bench/media.py --backend sqlite --rounds 1 --format openai

Generates one agent session of ``--turns`` calls: each turn the agent acts (a ``computer`` tool
call) and sends back one new, distinct screenshot (``--size`` bytes of PNG-like random data), and
each request re-sends the whole conversation so far, as agents do. Anthropic: the screenshot is a
base64 image block in the tool_result; OpenAI Chat: a data URL in a user message after the tool
message. Each exchange goes through the real translator (``anthropic`` / ``openai_chat``) and is
written as its own batch, as the proxy or the receiver writes one call.

Two stores per round, interleaved, each fresh: ``whole`` (blob_min out of reach: every request
kept whole, the store before blobs: the baseline) and ``blobs`` (each distinct blob once). For
each: the store's growth (``size()``: SQLite's pages, PostgreSQL's tables with TOAST and
indexes), the time to write the session and the time to read it back (``iter_facts``, every fact
checked byte for byte against what was written). ``growth/need`` compares the growth with what
must be kept: the unique image bytes plus the text (the facts' codec bytes without their base64
images); ``requests/growth`` compares the requests as sent with the growth. Figures are the
medians of the rounds; ratios are against ``whole`` of this run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg

from lithify.core import codec
from lithify.model import InferenceCall
from lithify.store import FactFilter, open_store
from lithify.translate import anthropic, openai_chat

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x05\x00\x00\x00\x03\x20\x08\x02\x00\x00\x00"
TASK = "Open the system settings, switch the display to dark mode and confirm it took effect."
ACTIONS = ("left_click", "type", "key", "scroll", "screenshot", "mouse_move")


def screenshot(rng: random.Random, size: int) -> bytes:
    return PNG + rng.randbytes(size - len(PNG))


def action(rng: random.Random, turn: int) -> dict[str, Any]:
    kind = ACTIONS[turn % len(ACTIONS)]
    out: dict[str, Any] = {"action": kind}
    if kind in ("left_click", "mouse_move", "scroll"):
        out["coordinate"] = [rng.randrange(1280), rng.randrange(800)]
    if kind == "type":
        out["text"] = "dark mode"
    if kind == "key":
        out["text"] = "Return"
    return out


def anthropic_session(turns: int, size: int, seed: int) -> Iterator[tuple[int, InferenceCall]]:
    """(request bytes, fact) per turn."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    tools = [
        {
            "type": "computer_20250124",
            "name": "computer",
            "display_width_px": 1280,
            "display_height_px": 800,
        }
    ]
    for turn in range(turns):
        call = f"toolu_{seed}_{turn:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {turn}: I will act on the screen."},
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": "computer",
                        "input": action(rng, turn),
                    },
                ],
            }
        )
        data = base64.b64encode(screenshot(rng, size)).decode()
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": [image]}],
            }
        )
        request = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": "You operate a computer through the computer tool.",
            "tools": tools,
            "messages": list(messages),
        }
        response = {
            "id": f"msg_{seed}_{turn:03d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "The screen changed; next step."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{seed}_{turn + 1:03d}",
                    "name": "computer",
                    "input": action(rng, turn + 1),
                },
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1500 * (turn + 1), "output_tokens": 60},
        }
        fact = anthropic.translate(request, response, meta={"session_id": f"cu-{seed}"})
        assert isinstance(fact, InferenceCall), fact
        yield len(orjson.dumps(request)), fact


def openai_session(turns: int, size: int, seed: int) -> Iterator[tuple[int, InferenceCall]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You operate a computer through the computer tool."},
        {"role": "user", "content": TASK},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "computer",
                "parameters": {"type": "object", "properties": {"action": {"type": "string"}}},
            },
        }
    ]
    for turn in range(turns):
        call = f"call_{seed}_{turn:03d}"
        args = orjson.dumps(action(rng, turn)).decode()
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "computer", "arguments": args},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": "done; screenshot below"})
        url = "data:image/png;base64," + base64.b64encode(screenshot(rng, size)).decode()
        messages.append(
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
        )
        request = {"model": "gpt-4.1", "tools": tools, "messages": list(messages)}
        nxt = orjson.dumps(action(rng, turn + 1)).decode()
        response = {
            "id": f"chatcmpl-{seed}-{turn:03d}",
            "object": "chat.completion",
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{seed}_{turn + 1:03d}",
                                "type": "function",
                                "function": {"name": "computer", "arguments": nxt},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 1500 * (turn + 1), "completion_tokens": 40},
        }
        fact = openai_chat.translate(request, response, meta={"session_id": f"cu-{seed}"})
        assert isinstance(fact, InferenceCall), fact
        yield len(orjson.dumps(request)), fact


SESSIONS = {"anthropic": anthropic_session, "openai": openai_session}


def generate(fmt: str, turns: int, size: int) -> tuple[list[InferenceCall], dict[str, int]]:
    facts: list[InferenceCall] = []
    requests = images = text = 0
    seen: set[bytes] = set()
    for sent, fact in SESSIONS[fmt](turns, size, seed=7):
        facts.append(fact)
        requests += sent
        body = codec.encode(fact)
        stored, blobs = codec.split_blobs(body)
        for sha, data in blobs.items():
            if sha not in seen:
                seen.add(sha)
                images += len(data)
        skeleton = codec.spliced(memoryview(stored))[0] if blobs else body
        text += len(skeleton)
    return facts, {"requests": requests, "images": images, "text": text}


def measure(url: str, facts: list[InferenceCall], whole: bool) -> dict[str, float]:
    digests = [hashlib.blake2b(codec.encode(f)).digest() for f in facts]
    with open_store(url) as store:
        if whole:
            store.blob_min = 1 << 62  # nothing is long enough: every body kept whole
        before = store.size()
        codec.forget_runs()  # each image cut cold on first sight, as a fresh process would
        t0 = time.perf_counter()
        for fact in facts:  # one call a batch, as a proxy or receiver writes them
            store.insert_facts([fact])
        wrote = time.perf_counter() - t0
        grew = store.size() - before
        t0 = time.perf_counter()
        read = [hashlib.blake2b(codec.encode(f)).digest() for f in store.iter_facts(FactFilter())]
        took = time.perf_counter() - t0
    assert sorted(read) == sorted(digests), "a fact did not read back byte for byte"
    return {"growth": grew, "write": wrote, "read": took}


def postgres_url(given: str | None) -> str:
    if given:
        return given
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres"), "start"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def run(backend: str, facts: list[InferenceCall], whole: bool, pg: str | None) -> dict[str, float]:
    if backend == "sqlite":
        tmp = Path(tempfile.mkdtemp(prefix="lithify-media-"))
        try:
            return measure(f"sqlite://{tmp / 'facts.db'}", facts, whole)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    assert pg is not None
    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    try:
        sep = "&" if "?" in pg else "?"
        return measure(f"{pg}{sep}options=-csearch_path%3D{schema}", facts, whole)
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--size", type=int, default=200_000, help="bytes of each screenshot")
    ap.add_argument("--format", choices=[*SESSIONS, "both"], default="anthropic")
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--postgres", help="a PostgreSQL URL (default: scripts/postgres)")
    args = ap.parse_args()
    formats = list(SESSIONS) if args.format == "both" else [args.format]
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    pg = postgres_url(args.postgres) if "postgres" in backends else None

    print(
        f"lithify store, a computer-use session: {args.turns} turns, one {args.size:,} B "
        f"screenshot a turn, each request re-sending the whole history; {args.rounds} rounds, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start"
    )
    head = (
        f"{'format':<10}{'backend':<10}{'store':<7}{'growth MB':>10}{'growth/need':>12}"
        f"{'requests/growth':>16}{'write s':>9}{'read s':>8}{'size ×':>8}{'write ×':>8}{'read ×':>8}"
    )
    lines: list[str] = []
    for fmt in formats:
        facts, sizes = generate(fmt, args.turns, args.size)
        need = sizes["images"] + sizes["text"]
        print(
            f"{fmt}: requests {sizes['requests'] / 1e6:,.1f} MB, unique images "
            f"{sizes['images'] / 1e6:,.1f} MB, text {sizes['text'] / 1e6:,.2f} MB"
        )
        for backend in backends:
            got: dict[bool, list[dict[str, float]]] = {True: [], False: []}
            for _ in range(args.rounds):
                for whole in (True, False):
                    got[whole].append(run(backend, facts, whole, pg))
            med = {
                whole: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                for whole, rs in got.items()
            }
            base = med[True]
            for whole in (True, False):
                m = med[whole]
                lines.append(
                    f"{fmt:<10}{backend:<10}{'whole' if whole else 'blobs':<7}"
                    f"{m['growth'] / 1e6:>10,.1f}{m['growth'] / need:>12.2f}"
                    f"{sizes['requests'] / m['growth']:>16.1f}{m['write']:>9.2f}{m['read']:>8.2f}"
                    f"{m['growth'] / base['growth']:>8.3f}{m['write'] / base['write']:>8.2f}"
                    f"{m['read'] / base['read']:>8.2f}"
                )
    print(head)
    print("\n".join(lines))
    print(
        "need: unique image bytes + text (codec bytes without the base64 images); ×: against "
        f"'whole' (every request kept whole); medians of {args.rounds} rounds; load "
        f"{os.getloadavg()[0]:.1f} at the end"
    )


if __name__ == "__main__":
    main()
