"""Benchmark: OTLP → facts conversion against a bare JSON parse of the same bytes.

    .venv/bin/python bench/convert.py                 # the table (≈1 minute)
    .venv/bin/python bench/convert.py --gb 1          # also peak RSS of `lithify convert` on 1 GB
    .venv/bin/python bench/convert.py --process       # whole processes against the floor (≈2 min)
    .venv/bin/python bench/convert.py --process --before ../old/src   # and another checkout's

Generates OTLP requests of realistic GenAI spans (≈5 KB of message content each, tool calls and
reasoning included), 512 spans a request as the SDK's batch processor sends them, then times:
the bare `orjson.loads` of the JSON lines (the baseline), the conversion of the same JSON lines
as `lithify convert` does it (bytes in, `ingest.files.translate_json`), the protobuf parse alone,
the conversion of the same protobuf requests, and the conversion of already decoded JSON
documents (`translate_document`, for callers that hold a dict). Facts go to the JSON-lines sink
of `lithify convert`. Every round times each step once, in turn; a figure is the median over the
rounds, and a ratio the median of each round's ratio to that round's baseline.

``--process`` times whole processes instead, start-up and the fsynced output included:
`lithify convert SPANS.jsonl -o facts.jsonl` on 20,000 such spans (40 OTLP/JSON lines of 500),
against the floor of the same job, a process that parses the same lines with orjson and writes
each line and its re-encoding to a file (about the facts' size), fsynced. ``--before SRC`` adds
the same command run from another checkout's ``src`` (PYTHONPATH), in the same rounds.
`lithify convert` runs as a user gets it (worker processes on a machine of several cores, see
docs/convert.md) and with ``--workers 0`` (this process alone).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import peak
from lithify.ingest.convert import JsonlSink
from lithify.ingest.files import translate_json
from lithify.model import InferenceCall
from lithify.translate import translate_document, translate_protobuf

WORDS = (
    "the agent calls a tool to look up the order then reads the result and answers the user with "
    "a short summary of the shipping status including carrier tracking number and expected date"
).split()


def _text(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def make_span_attrs(rng: random.Random, i: int) -> list[tuple[str, object]]:
    call_id = f"call_{i:08x}"
    inputs = [
        {"role": "system", "parts": [{"type": "text", "content": _text(rng, 1200)}]},
        {"role": "user", "parts": [{"type": "text", "content": _text(rng, 600)}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": _text(rng, 500)},
                {
                    "type": "tool_call",
                    "id": call_id,
                    "name": "lookup_order",
                    "arguments": {"order_id": f"A-{i}", "fields": ["status", "eta"]},
                },
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call_id, "response": _text(rng, 1200)}],
        },
    ]
    outputs = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": _text(rng, 400)},
                {"type": "text", "content": _text(rng, 900)},
            ],
            "finish_reason": "stop",
        }
    ]
    tools = [
        {
            "type": "function",
            "name": "lookup_order",
            "description": "Look up an order by id.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
    ]
    return [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o-mini"),
        ("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
        ("gen_ai.response.id", f"chatcmpl-{i:010d}"),
        ("gen_ai.request.temperature", 0.7),
        ("gen_ai.usage.input_tokens", 1200 + i % 100),
        ("gen_ai.usage.output_tokens", 300 + i % 50),
        ("gen_ai.response.finish_reasons", ["stop"]),
        ("gen_ai.conversation.id", f"conv-{i // 8}"),
        ("gen_ai.input.messages", orjson.dumps(inputs).decode()),
        ("gen_ai.output.messages", orjson.dumps(outputs).decode()),
        ("gen_ai.tool.definitions", orjson.dumps(tools).decode()),
    ]


def _json_value(v: object) -> dict[str, object]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_json_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _pb_set(any_value: object, v: object) -> None:
    if isinstance(v, bool):
        any_value.bool_value = v  # type: ignore[attr-defined]
    elif isinstance(v, int):
        any_value.int_value = v  # type: ignore[attr-defined]
    elif isinstance(v, float):
        any_value.double_value = v  # type: ignore[attr-defined]
    elif isinstance(v, list):
        for x in v:
            _pb_set(any_value.array_value.values.add(), x)  # type: ignore[attr-defined]
    else:
        any_value.string_value = str(v)  # type: ignore[attr-defined]


def make_requests(
    n_requests: int, per_request: int, seed: int = 7, protobuf: bool = True
) -> tuple[list[bytes], list[bytes]]:
    """The same spans as OTLP/JSON lines and as protobuf requests (none unless ``protobuf``)."""
    rng = random.Random(seed)
    json_lines: list[bytes] = []
    pb_reqs: list[bytes] = []
    n = 0
    for _ in range(n_requests):
        spans_json = []
        req = ExportTraceServiceRequest()
        ss = req.resource_spans.add().scope_spans.add()
        ss.scope.name = "opentelemetry.instrumentation.openai_v2"
        for _ in range(per_request):
            n += 1
            attrs = make_span_attrs(rng, n)
            trace, span = f"{n:032x}", f"{n:016x}"
            start = 1_760_000_000_000_000_000 + n * 1_000_000
            spans_json.append(
                {
                    "traceId": trace,
                    "spanId": span,
                    "name": "chat gpt-4o-mini",
                    "kind": 3,
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(start + 900_000_000),
                    "attributes": [{"key": k, "value": _json_value(v)} for k, v in attrs],
                }
            )
            if not protobuf:
                continue
            s = ss.spans.add()
            s.trace_id, s.span_id = bytes.fromhex(trace), bytes.fromhex(span)
            s.name, s.kind = "chat gpt-4o-mini", 3
            s.start_time_unix_nano, s.end_time_unix_nano = start, start + 900_000_000
            for k, v in attrs:
                kv = s.attributes.add()
                kv.key = k
                _pb_set(kv.value, v)
        doc = {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "scope": {"name": "opentelemetry.instrumentation.openai_v2"},
                            "spans": spans_json,
                        }
                    ]
                }
            ]
        }
        json_lines.append(orjson.dumps(doc))
        if protobuf:
            pb_reqs.append(req.SerializeToString())
    return json_lines, pb_reqs


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)


def _interleaved(
    steps: list[tuple[str, Callable[[], object]]], rounds: int
) -> list[tuple[str, float, float]]:
    """(name, median s, median ratio to the first step): each round times every step once, so a
    slow stretch of a noisy machine lands on the baseline and the conversions alike, and each
    ratio is taken within its round."""
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(rounds):
        for i, (_, fn) in enumerate(steps):
            gc.collect()  # no step pays for the garbage of the one before
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    base = times[0]
    return [
        (
            name,
            statistics.median(ts),
            statistics.median(t / b for t, b in zip(ts, base, strict=True)),
        )
        for (name, _), ts in zip(steps, times, strict=True)
    ]


def bench(n_requests: int, per_request: int, rounds: int) -> list[tuple[str, float, float]]:
    json_lines, pb_reqs = make_requests(n_requests, per_request)
    # Facts go where `lithify convert` sends them: JSON lines, buffered, written out per MB.
    facts = JsonlSink(_Discard())

    def sink(results: object) -> None:
        for r in results:  # type: ignore[attr-defined]
            if isinstance(r, InferenceCall):
                facts.fact(r)
            else:
                raise AssertionError(f"unexpected skip: {r}")

    def parse_json() -> None:
        for line in json_lines:
            orjson.loads(line)

    def convert_json() -> None:
        for line in json_lines:
            sink(translate_json(line))

    def convert_docs() -> None:
        for line in json_lines:
            sink(translate_document(orjson.loads(line)))

    def parse_pb() -> None:
        for data in pb_reqs:
            ExportTraceServiceRequest().ParseFromString(data)

    def convert_pb() -> None:
        for data in pb_reqs:
            sink(translate_protobuf(data))

    convert_json()  # warm-up, and a check that every span gives a fact
    steps = [
        ("orjson.loads (baseline)", parse_json),
        ("convert OTLP/JSON", convert_json),
        ("protobuf parse only", parse_pb),
        ("convert OTLP protobuf", convert_pb),
        ("convert decoded JSON docs", convert_docs),
    ]
    return _interleaved(steps, rounds)


def peak_rss_on_big_input(gb: float) -> tuple[float, float, int]:
    """Write ≈gb of OTLP/JSON lines, run `lithify convert` on it; (input GB, peak RSS MB, s)."""
    json_lines, _ = make_requests(8, 64, seed=11)
    target = int(gb * 1024**3)
    with tempfile.TemporaryDirectory(dir=os.environ.get("LITHIFY_BENCH_TMP")) as tmp:
        src = Path(tmp) / "big.jsonl"
        size = 0
        with open(src, "wb") as fh:
            while size < target:
                for line in json_lines:
                    fh.write(line + b"\n")
                    size += len(line) + 1
        cmd = peak.lithify("convert", str(src), "-o", os.devnull, "--no-progress", "--json")
        t0 = time.perf_counter()
        done = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - t0
    return size / 1024**3, peak.parse_mb(done.stderr), int(elapsed)


# The floor of `lithify convert` as a whole process: read the lines, parse each, write it and its
# re-encoding (about the size of the facts), fsync. What no conversion can go below.
FLOOR = """
import os, sys, orjson
with open(sys.argv[1], "rb") as src, open(sys.argv[2], "wb", buffering=1 << 20) as out:
    for line in src:
        out.write(line)
        out.write(orjson.dumps(orjson.loads(line)))
    out.flush()
    os.fsync(out.fileno())
"""


def _run_timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one child process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def bench_processes(
    n_requests: int, per_request: int, rounds: int, before: str | None
) -> tuple[list[tuple[str, float, float, float, float, int]], int]:
    """Whole processes, interleaved: (name, median wall s, median CPU s, median wall and CPU
    ratios to the floor's in the same round, output bytes) per process, and the input's size."""
    json_lines, _ = make_requests(n_requests, per_request, protobuf=False)
    lithify = str(Path(sys.executable).with_name("lithify"))
    with tempfile.TemporaryDirectory(dir=os.environ.get("LITHIFY_BENCH_TMP")) as tmp:
        src = Path(tmp) / "spans.jsonl"
        src.write_bytes(b"".join(line + b"\n" for line in json_lines))
        names = ("floor", "now", "alone", "before")
        outs = {name: Path(tmp) / f"{i}.out" for i, name in enumerate(names)}
        runs: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("floor (orjson, write, fsync)", [sys.executable, "-c", FLOOR, str(src), str(outs["floor"])], None),
            ("lithify convert", [lithify, "convert", str(src), "-o", str(outs["now"])], None),
            ("lithify convert --workers 0", [lithify, "convert", str(src), "-o", str(outs["alone"]), "--workers", "0"], None),
        ]  # fmt: skip
        if before:
            env = {**os.environ, "PYTHONPATH": str(Path(before).resolve())}
            argv = [lithify, "convert", str(src), "-o", str(outs["before"])]
            runs.append((f"lithify convert ({before})", argv, env))
        walls: list[list[float]] = [[] for _ in runs]
        cpus: list[list[float]] = [[] for _ in runs]
        for _ in range(rounds):
            for i, (_, argv, env) in enumerate(runs):
                wall, cpu = _run_timed(argv, env)
                walls[i].append(wall)
                cpus[i].append(cpu)
        sizes = [outs[k].stat().st_size for k in names[: len(runs)]]
        if outs["now"].read_bytes() != outs["alone"].read_bytes():
            print("note: one process and its workers wrote different facts", file=sys.stderr)
        if before and outs["now"].read_bytes() != outs["before"].read_bytes():
            print("note: the two checkouts wrote different facts", file=sys.stderr)
        size = src.stat().st_size
    rows = [
        (
            name,
            statistics.median(w),
            statistics.median(c),
            statistics.median(x / f for x, f in zip(w, walls[0], strict=True)),
            statistics.median(x / f for x, f in zip(c, cpus[0], strict=True)),
            out_size,
        )
        for (name, _, _), w, c, out_size in zip(runs, walls, cpus, sizes, strict=True)
    ]
    return rows, size


CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"

# Real recorded exchanges per provider format: (request file, response file), plain and streamed.
PROVIDER_EXCHANGES = {
    "openai-chat": (
        ("openai-chat/parallel_tool_calls.turn1.request.json", "openai-chat/parallel_tool_calls.turn1.response.json"),
        ("openai-chat/parallel_tool_calls.turn1.request.json", "openai-chat/parallel_tool_calls_streaming.response.sse"),
    ),
    "openai-responses": (
        ("openai-responses/function_call_forced.request.json", "openai-responses/function_call_forced.response.json"),
        ("openai-responses/function_call_forced.request.json", "openai-responses/function_call_streaming.response.sse"),
    ),
    "anthropic": (
        ("anthropic/thinking_tool_result_roundtrip.request.json", "anthropic/thinking_tool_use.response.json"),
        ("anthropic/thinking_tool_result_roundtrip.request.json", "anthropic/tool_use_streaming.response.sse"),
    ),
    "gemini": (
        ("gemini/vertex_function_response_roundtrip.request.json", "gemini/vertex_function_response_roundtrip.response.json"),
        ("gemini/function_response_with_ids.request.json", "gemini/function_call_thought_signature_streaming.response.sse"),
    ),
}  # fmt: skip


def bench_providers(repeat: int, rounds: int) -> list[tuple[str, float, float, float, int]]:
    """Per format, plain and streamed: (name, baseline s, convert s, ratio, exchanges).

    The baseline parses the same bytes with orjson (every SSE data line for a stream); the
    conversion is `translate_exchange` from those bytes to a fact.
    """
    from lithify.translate.provider import translate_exchange
    from lithify.translate.sse import iter_events

    rows = []
    for fmt, pairs in PROVIDER_EXCHANGES.items():
        for kind, (req_path, resp_path) in zip(("plain", "streamed"), pairs, strict=True):
            req = (CORPUS / req_path).read_bytes()
            resp = (CORPUS / resp_path).read_bytes()
            streamed = resp_path.endswith(".sse")
            text = resp.decode()

            def parse(
                req: bytes = req, resp: bytes = resp, text: str = text, streamed: bool = streamed
            ) -> None:
                for _ in range(repeat):
                    orjson.loads(req)
                    if streamed:
                        for ev in iter_events(text):
                            ev.json()
                    else:
                        orjson.loads(resp)

            def convert(
                req: bytes = req,
                resp: bytes = resp,
                text: str = text,
                streamed: bool = streamed,
                resp_path: str = resp_path,
            ) -> None:
                for _ in range(repeat):
                    body = text if streamed else orjson.loads(resp)
                    r = translate_exchange(orjson.loads(req), body)
                    if not isinstance(r, InferenceCall):
                        raise AssertionError(f"{resp_path}: {r}")

            convert()
            (_, base_s, _), (_, conv_s, ratio) = _interleaved(
                [("parse", parse), ("convert", convert)], rounds
            )
            rows.append((f"{fmt} {kind}", base_s, conv_s, ratio, repeat))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=8, help="OTLP requests per round")
    ap.add_argument("--spans", type=int, default=512, help="spans per request")
    ap.add_argument("--rounds", type=int, help="rounds (default: 9, or 7 with --process)")
    ap.add_argument("--gb", type=float, default=0.0, help="also measure peak RSS on this many GB")
    ap.add_argument("--exchanges", type=int, default=500, help="provider exchanges per format")
    ap.add_argument("--process", action="store_true", help="whole processes against the floor")
    ap.add_argument("--before", help="with --process: also lithify from this checkout's src")
    args = ap.parse_args()
    if args.process:
        rounds = args.rounds or 7
        load = os.getloadavg()
        rows, size = bench_processes(40, 500, rounds, args.before)
        print(
            f"20,000 spans ({size / 1e6:.0f} MB of OTLP/JSON lines), whole processes, median of "
            f"{rounds} interleaved rounds; load average {load[0]:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end"
        )
        print(
            f"{'process':<44}{'wall s':>8}{'CPU s':>8}{'× floor wall':>14}{'× floor CPU':>13}"
            f"{'output MB':>11}"
        )
        for name, wall, cpu, ratio, cpu_ratio, out_size in rows:
            print(
                f"{name:<44}{wall:>8.2f}{cpu:>8.2f}{ratio:>14.2f}{cpu_ratio:>13.2f}"
                f"{out_size / 1e6:>11.0f}"
            )
        return
    args.rounds = args.rounds or 9
    rows = bench(args.requests, args.spans, args.rounds)
    spans = args.requests * args.spans
    print(f"{spans} spans per round, median of {args.rounds} rounds, one core")
    print(f"{'step':<26}{'median s':>10}{'spans/s':>12}{'× baseline':>12}")
    for name, secs, ratio in rows:
        print(f"{name:<26}{secs:>10.3f}{spans / secs:>12,.0f}{ratio:>12.2f}")
    print()
    print(
        f"provider exchanges (recorded corpus payloads), {args.exchanges} per row, median of {args.rounds}"
    )
    print(f"{'format':<28}{'orjson s':>10}{'convert s':>11}{'facts/s':>10}{'× orjson':>10}")
    for name, base_s, conv_s, ratio, n in bench_providers(args.exchanges, args.rounds):
        print(f"{name:<28}{base_s:>10.3f}{conv_s:>11.3f}{n / conv_s:>10,.0f}{ratio:>10.2f}")
    if args.gb:
        size, rss, secs = peak_rss_on_big_input(args.gb)
        print(
            f"lithify convert on {size:.2f} GB of OTLP/JSON lines: peak RSS {rss:.0f} MB, {secs} s"
        )


if __name__ == "__main__":
    main()
