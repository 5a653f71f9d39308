"""Hostile and broken input against a real `lithify serve` and a real `lithify proxy` (issue 13):
thousands of generated requests (OTLP/JSON and protobuf with wrong types at every level,
truncations, bad text and bad encodings, oversized, numerous and slow headers, slow and abandoned
bodies, pipelining, half-closes), with valid requests sent between them. Each server must answer
every request it was sent whole, log every request, answer no 5xx but the documented 503, stay
within its documented memory bound, and store every valid request.

``LITHIFY_FUZZ_REQUESTS`` sets the generated requests per server (default 1500, about 25 s of
suite time per server on the 2-core development machine); docs/serve.md records a long run.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import select
import socket
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from lithify.ingest._server import HeadLimits
from lithify.store import StoreUnavailable, open_store
from tests.otlp_values import pb_value
from tests.proxy.helpers import ProxyProcess, Scripted, Seen, Upstream, start_proxy
from tests.serve.helpers import ServerProcess, genai_spans, start_server, traces_json_doc, traces_pb

REQUESTS = int(os.environ.get("LITHIFY_FUZZ_REQUESTS", "1500"))
BODY_LIMIT = 256 * 1024  # both servers run with --max-body-size 256KiB
HEAD = HeadLimits()
READ = 256 * 1024  # the most one read of a socket adds to a request head held (uvloop)

# -- a client that sends any bytes and reads what comes back ----------------------------------


@dataclass
class Case:
    """One connection's worth of requests, as bytes, and what a careful server does with it."""

    what: str
    data: bytes
    answers: int | None = 1  # responses owed; None: any number (the server may not see it all)
    logged: int = 1  # log lines the server writes for it
    fewer_logged: int = 0  # ... or up to this many fewer (requests it may never have read)
    half_close: bool = False
    abandon: bool = False  # the client leaves without reading


@dataclass
class Outcome:
    case: Case
    port: int  # the client's port: what the server's log line names
    statuses: list[int] = field(default_factory=list)
    error: str | None = None


def _responses(data: bytes) -> list[int]:
    """The statuses of the HTTP responses in ``data``, read one after the other."""
    statuses = []
    while data.startswith(b"HTTP/1."):
        end = data.find(b"\r\n\r\n")
        if end < 0:
            break
        head = data[:end].split(b"\r\n")
        status = int(head[0].split()[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in head[1:])}
        rest = data[end + 4 :]
        if status < 200:  # 100 Continue: an interim answer, the real one follows
            data = rest
            continue
        statuses.append(status)
        if b"content-length" in fields:
            data = rest[int(fields[b"content-length"]) :]
        elif fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                line, _, rest = rest.partition(b"\r\n")
                size = int(line.split(b";")[0] or b"0", 16)
                rest = rest[size + 2 :]
                if size == 0:
                    break
            data = rest
        else:
            break  # the body runs to the end of the connection
    return statuses


def exchange(port: int, case: Case, timeout: float = 60) -> Outcome:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = Outcome(case, s.getsockname()[1])
    received = b""
    try:
        try:
            s.sendall(case.data)
            if case.half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:  # refused while sending (a head over the bound): read what came
            out.error = f"send: {e}"
        if not case.abandon:
            while chunk := s.recv(1 << 16):
                received += chunk
    except OSError as e:
        out.error = f"{out.error or ''} recv: {e}"
    finally:
        s.close()
    out.statuses = _responses(received)
    return out


def _request(
    method: bytes,
    path: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    *,
    close: bool = True,
    chunked: bytes | None = None,
) -> bytes:
    head = [method + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    head += [k + b": " + v for k, v in headers]
    if chunked is not None:
        head.append(b"Transfer-Encoding: " + chunked)
        body = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
    else:
        head.append(b"Content-Length: %d" % len(body))
    if close:
        head.append(b"Connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + body


# -- OTLP, right and wrong at every level -------------------------------------------------------

_JUNK = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=4)
    | st.just([])
    | st.just({})
    | st.lists(st.integers(), max_size=3)
)
_TEXT = st.text(max_size=10) | st.sampled_from(["\ud800", "a\udc80b", "\udfff", "é\x00"])
_HEX = st.binary(min_size=8, max_size=16).map(bytes.hex)


def _or_junk(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(s, s, s, s, _JUNK)


def _deep(levels: int) -> dict[str, Any]:
    v: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels):
        v = {"arrayValue": {"values": [v]}}
    return v


_SCALARS = st.one_of(
    _TEXT.map(lambda t: {"stringValue": t}),
    st.integers(-(2**64), 2**64).map(lambda n: {"intValue": str(n)}),
    st.floats().map(lambda f: {"doubleValue": f}),
    st.booleans().map(lambda b: {"boolValue": b}),
    st.binary(max_size=6).map(lambda b: {"bytesValue": base64.b64encode(b).decode()}),
    st.just({}),
    _JUNK.map(lambda j: {"stringValue": j}),
)
_VALUES = st.one_of(
    st.recursive(
        _SCALARS,
        lambda c: (
            st.lists(c, max_size=3).map(lambda vs: {"arrayValue": {"values": vs}})
            | st.lists(st.fixed_dictionaries({"key": _TEXT, "value": c}), max_size=3).map(
                lambda kvs: {"kvlistValue": {"values": kvs}}
            )
        ),
        max_leaves=8,
    ),
    st.integers(28, 60).map(_deep),  # around the depth limit
)
_ATTRS = st.lists(
    _or_junk(st.fixed_dictionaries({"key": _or_junk(_TEXT), "value": _or_junk(_VALUES)})),
    max_size=4,
)
_SPAN = st.fixed_dictionaries(
    {},
    optional={
        "traceId": _or_junk(_HEX),
        "spanId": _or_junk(_HEX),
        "parentSpanId": _or_junk(_HEX),
        "name": _or_junk(_TEXT),
        "kind": _or_junk(st.integers(0, 6) | st.sampled_from(["SPAN_KIND_CLIENT", "X"])),
        "startTimeUnixNano": _or_junk(st.integers(0, 2**65).map(str)),
        "endTimeUnixNano": _or_junk(st.integers(0, 2**65).map(str)),
        "attributes": _or_junk(_ATTRS),
        "events": _or_junk(st.lists(st.fixed_dictionaries({"name": _TEXT, "attributes": _ATTRS}), max_size=2)),
        "status": _or_junk(st.fixed_dictionaries({"code": _or_junk(st.integers(0, 2)), "message": _or_junk(_TEXT)})),
    },
)  # fmt: skip
_RECORD = st.fixed_dictionaries(
    {},
    optional={
        "traceId": _or_junk(_HEX),
        "spanId": _or_junk(_HEX),
        "eventName": _or_junk(st.sampled_from(["gen_ai.client.inference.operation.details", "gen_ai.user.message", "gen_ai.evaluation.result"]) | _TEXT),
        "timeUnixNano": _or_junk(st.integers(0, 2**64).map(str)),
        "severityNumber": _or_junk(st.integers(0, 24)),
        "body": _or_junk(_VALUES),
        "attributes": _or_junk(_ATTRS),
    },
)  # fmt: skip


def _otlp_doc(signal: str) -> st.SearchStrategy[Any]:
    outer, inner, leaf, unit = (
        ("resourceSpans", "scopeSpans", "spans", _SPAN)
        if signal == "traces"
        else ("resourceLogs", "scopeLogs", "logRecords", _RECORD)
    )
    scope = st.fixed_dictionaries(
        {}, optional={"name": _or_junk(_TEXT), "attributes": _or_junk(_ATTRS)}
    )
    group = st.fixed_dictionaries(
        {},
        optional={"scope": _or_junk(scope), leaf: _or_junk(st.lists(_or_junk(unit), max_size=4))},
    )
    resource = st.fixed_dictionaries({}, optional={"attributes": _or_junk(_ATTRS)})
    top = st.fixed_dictionaries(
        {},
        optional={
            "resource": _or_junk(resource),
            inner: _or_junk(st.lists(_or_junk(group), max_size=3)),
        },
    )
    return _or_junk(st.fixed_dictionaries({outer: _or_junk(st.lists(_or_junk(top), max_size=3))}))  # fmt: skip


@st.composite
def _json_body(draw: st.DrawFn, signal: str) -> bytes:
    doc = draw(_otlp_doc(signal))
    if draw(st.booleans()):  # \uXXXX escapes, lone surrogates among them
        return json.dumps(doc).encode()
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")  # bad UTF-8


_PY_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=8) | st.binary(max_size=4),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=10,
)  # fmt: skip


@st.composite
def _pb_body(draw: st.DrawFn, signal: str) -> bytes:
    attrs = [
        KeyValue(key=k, value=pb_value(v))
        for k, v in draw(st.dictionaries(st.text(max_size=8), _PY_VALUES, max_size=4)).items()
    ]
    req: Any
    if signal == "traces":
        req = ExportTraceServiceRequest()
        ss = req.resource_spans.add().scope_spans.add()
        for _ in range(draw(st.integers(0, 4))):
            s = ss.spans.add()
            s.trace_id, s.span_id = (
                draw(st.binary(min_size=16, max_size=16)),
                draw(st.binary(min_size=8, max_size=8)),
            )
            s.name = draw(st.text(max_size=10))
            s.attributes.extend(attrs)
    else:
        req = ExportLogsServiceRequest()
        sl = req.resource_logs.add().scope_logs.add()
        for _ in range(draw(st.integers(0, 4))):
            r = sl.log_records.add()
            r.event_name = draw(st.sampled_from(["gen_ai.client.inference.operation.details", "x"]))
            r.attributes.extend(attrs)
    data = bytearray(req.SerializeToString())
    how = draw(
        st.sampled_from(["as is", "truncated", "byte", "bad utf-8", "deep", "junk", "random"])
    )
    if how == "truncated" and data:
        del data[draw(st.integers(0, len(data) - 1)) :]
    elif how == "byte" and data:
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif how == "bad utf-8":
        letters = [i for i, b in enumerate(data) if 0x61 <= b <= 0x7A]
        for i in draw(st.lists(st.sampled_from(letters), max_size=3)) if letters else []:
            data[i] = 0xFF
    elif how == "deep":
        v = b"\x0a\x01x"
        for _ in range(draw(st.integers(30, 120))):
            inner = b"\x0a" + _varint(len(v)) + v
            v = b"\x2a" + _varint(len(inner)) + inner
        kv = b"\x0a\x01k\x12" + _varint(len(v)) + v
        unit = (
            b"\x4a" + _varint(len(kv)) + kv
            if signal == "traces"
            else b"\x32" + _varint(len(kv)) + kv
        )
        framed = b"\x12" + _varint(len(unit)) + unit
        group = b"\x12" + _varint(len(framed)) + framed
        data += b"\x0a" + _varint(len(group)) + group
    elif how == "junk":
        data += draw(st.binary(max_size=16))
    elif how == "random":
        data = bytearray(draw(st.binary(max_size=64)))
    return bytes(data)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


# -- HTTP around the bodies ------------------------------------------------------------------------

_CODINGS = ["", "gzip", "x-gzip", "deflate", "raw deflate", "cut gzip", "not gzip", "bomb", "br"]


def _encode(body: bytes, coding: str) -> tuple[bytes, bytes]:
    if coding == "gzip" or coding == "x-gzip":
        return gzip.compress(body), coding.encode()
    if coding == "deflate":
        return zlib.compress(body), b"deflate"
    if coding == "raw deflate":
        c = zlib.compressobj(wbits=-15)
        return c.compress(body) + c.flush(), b"deflate"
    if coding == "cut gzip":
        return gzip.compress(body)[:-6], b"gzip"
    if coding == "not gzip":
        return b"\x1f\x8b" + body[:20], b"gzip"
    if coding == "bomb":
        return gzip.compress(b"\x00" * (4 * BODY_LIMIT)), b"gzip"
    return body, coding.encode()


@st.composite
def _head_extras(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], str]:
    """Headers beyond the usual ones, and what they make of the request."""
    kind = draw(st.sampled_from(["none"] * 12 + ["big", "many", "expect", "upgrade", "odd"]))
    if kind == "big":
        return [(b"X-Big", b"v" * (HEAD.max_bytes + draw(st.integers(1, 4096))))], "big"
    if kind == "many":
        return [(b"X-H%d" % i, b"1") for i in range(HEAD.max_fields + 1)], "many"
    if kind == "expect":
        return [(b"Expect", b"100-continue")], "expect"
    if kind == "upgrade":
        return [(b"Connection", b"Upgrade"), (b"Upgrade", b"h2c")], "upgrade"
    if kind == "odd":
        name = draw(
            st.sampled_from(
                [b"Authorization", b"X-Lithify-Session", b"Content-Type", b"Accept-Encoding"]
            )
        )
        return [(name, draw(st.binary(max_size=20)).replace(b"\r", b"").replace(b"\n", b""))], "odd"
    return [], "none"  # fmt: skip


@st.composite
def _framing(draw: st.DrawFn, first: bytes) -> Case:
    """How the connection carries one request: as it is, pipelined with a second, half-closed,
    or abandoned half sent."""
    how = draw(st.sampled_from(["plain"] * 10 + ["pipelined", "half-close", "abandon", "garbage"]))
    if how == "pipelined":
        keep = first.replace(b"\r\nConnection: close", b"", 1)
        second = _request(b"POST", b"/v1/traces", [(b"Content-Type", b"application/json")], b"{}")
        # A first request refused before the app saw it (its head) closes the connection: the
        # second is never read.
        return Case("pipelined", keep + second, answers=None, logged=2, fewer_logged=1)
    if how == "half-close":
        return Case("half-close", first, answers=None, half_close=True)
    if how == "abandon":
        cut = draw(st.integers(1, max(1, len(first) - 1)))
        return Case("abandon", first[:cut], answers=None, fewer_logged=1, abandon=True)
    if how == "garbage":
        return Case("garbage", draw(st.sampled_from([b"GARBAGE\r\n\r\n", b"POST  HTTP/1.1\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00", b"POST /v1/traces HTTP/1.1\r\nContent-Length: -1\r\n\r\n"])))  # fmt: skip
    return Case("plain", first)


# -- the servers and their bounds ---------------------------------------------------------------


def _rss_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field_name} for {pid}")


def _workers(pid: int) -> list[int]:
    """The translation worker processes of a receiver (not multiprocessing's resource tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


def _settled(log: Path, quiet: float = 2.0, most: float = 60.0) -> None:
    """Wait until nothing has written to ``log`` for ``quiet`` seconds: the proxy's recorder, a
    process of its own, may still be draining the spool (and logging) after the proxy exits."""
    deadline = time.monotonic() + most
    size = -1
    while time.monotonic() < deadline:
        now = log.stat().st_size
        if now == size:
            return
        size = now
        time.sleep(quiet)


def _port(event: dict[str, Any]) -> int:
    return int(event["client"].rsplit(":", 1)[1])


def _log_clients(events: list[dict[str, Any]], names: tuple[str, ...]) -> Counter[int]:
    return Counter(_port(e) for e in events if e.get("event") in names and e.get("client"))


def _slow_cases(port: int, head: bytes, results: list[Outcome]) -> list[threading.Thread]:
    """Clients slower than the head's time limit, each on a thread of its own: two send a head
    a byte at a time (408, logged), two connect and send nothing (closed, nothing to log)."""

    def trickle() -> None:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        out = Outcome(Case("trickle", head), s.getsockname()[1])
        data = b""
        try:
            for b in head:
                if select.select([s], [], [], HEAD.timeout / 20)[0]:
                    break  # the server answered: read it before sending more
                s.sendall(bytes([b]))
            data = s.recv(65536)
        except OSError as e:
            out.error = str(e)
        finally:
            s.close()
        out.statuses = _responses(data)
        results.append(out)

    def idle() -> None:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        out = Outcome(Case("idle", b"", answers=0, logged=0), s.getsockname()[1])
        t0 = time.monotonic()
        if s.recv(10) != b"" or time.monotonic() - t0 > HEAD.timeout + 5:
            out.error = "an idle connection was not closed in time"
        s.close()
        results.append(out)

    return [threading.Thread(target=f, daemon=True) for f in (trickle, trickle, idle, idle)]


def _header_bomb(port: int, size: int) -> Outcome:
    """A header sent without end, as fast as the server takes it: the server must refuse it (a
    431 in its log) holding no more than the bound (the memory check). Loopback buffers may
    take all ``size`` bytes before the server reads any: the client cannot tell, the log can."""
    case = Case("header bomb", b"", answers=None)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    out = Outcome(case, s.getsockname()[1])
    sent = 0
    try:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nX-Bomb: ")
        while sent < size:
            s.sendall(b"b" * 65536)
            sent += 65536
    except OSError:
        pass  # refused while sending
    finally:
        with contextlib.suppress(OSError):
            out.statuses = _responses(s.recv(65536))
        s.close()
    return out


@dataclass
class Run:
    """What one fuzz run against one server sent and saw."""

    outcomes: list[Outcome] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)

    def check_answers(self, allowed_5xx: frozenset[int]) -> None:
        for o in self.outcomes:
            self.statuses.update(o.statuses)
            assert all(s < 500 or s in allowed_5xx for s in o.statuses), o
            if o.case.answers is not None:
                assert len(o.statuses) == o.case.answers, o

    def check_logged(self, logged: Counter[int]) -> None:
        """Each connection's requests have their log lines, by the client's port (a port the
        system gave out twice in a long run counts both connections' lines)."""
        least: Counter[int] = Counter()
        most: Counter[int] = Counter()
        for o in self.outcomes:
            least[o.port] += o.case.logged - o.case.fewer_logged
            most[o.port] += o.case.logged
        for port in least | most:
            assert least[port] <= logged[port] <= most[port], (
                port, logged[port], [o for o in self.outcomes if o.port == port],
            )  # fmt: skip

    def drive(
        self,
        port: int,
        cases: st.SearchStrategy[Case],
        valid: Callable[[int], tuple[Case, str]],
        head: bytes,
    ) -> float:
        """Send REQUESTS generated cases, a valid request (``valid(n)``: the case and what will
        be stored of it) after every tenth and a header bomb every 200th, while slow clients
        send ``head`` too slowly or nothing; the seconds the generated ones took."""
        slow: list[Outcome] = []
        threads = _slow_cases(port, head, slow)
        for t in threads:
            t.start()
        count = iter(range(1, 10**9))

        @settings(
            max_examples=REQUESTS,
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.shrink],
            suppress_health_check=list(HealthCheck),
        )
        @given(cases)
        def one(case: Case) -> None:
            n = next(count)
            self.outcomes.append(exchange(port, case))
            if n % 10 == 0:
                case, stored = valid(n)
                o = exchange(port, case)
                self.outcomes.append(o)
                assert o.statuses == [200], o
                self.valid.append(stored)
            if n % 200 == 0:
                self.outcomes.append(_header_bomb(port, 16 << 20))

        t0 = time.monotonic()
        one()
        elapsed = time.monotonic() - t0
        for t in threads:
            t.join(HEAD.timeout * 3)
        assert sorted((o.case.what, o.statuses, o.error) for o in slow) == [
            ("idle", [], None), ("idle", [], None), ("trickle", [408], None), ("trickle", [408], None),
        ], slow  # fmt: skip
        self.outcomes += slow
        return elapsed

    def check(self, allowed_5xx: frozenset[int], events: list[dict[str, Any]], *names: str) -> None:
        """Answers, log lines (a 431 for each header bomb), and no error logged."""
        self.check_answers(allowed_5xx)
        self.check_logged(_log_clients(events, names))
        bombs = {o.port for o in self.outcomes if o.case.what == "header bomb"}
        refused = {_port(e) for e in events if e.get("status") == 431 and e.get("client")}
        assert bombs and bombs <= refused, bombs - refused
        assert [e for e in events if e["level"] == "error"] == []


# -- serve ----------------------------------------------------------------------------------------


@st.composite
def _serve_case(draw: st.DrawFn) -> Case:
    signal = draw(st.sampled_from(["traces", "logs"]))
    kind = draw(st.sampled_from(["json", "protobuf", "json", "protobuf", "feedback"]))
    if kind == "feedback":
        body = json.dumps(
            draw(
                _JUNK
                | st.lists(st.dictionaries(st.text(max_size=6), _JUNK, max_size=4), max_size=3)
            )
        ).encode()
        path, ctype = b"/v1/feedback", b"application/json"
    else:
        body = draw(_json_body(signal) if kind == "json" else _pb_body(signal))
        path = b"/v1/" + signal.encode()
        ctype = b"application/json" if kind == "json" else b"application/x-protobuf"
    path = draw(
        st.sampled_from(
            [path] * 12 + [path + b"/", b"/v1/metrics", b"/v1/%74races", b"//v1/traces"]
        )
    )
    ctype = draw(
        st.sampled_from(
            [ctype] * 8
            + [b"application/json; charset=utf-8", b"application/protobuf", b"text/plain", b""]
        )
    )
    method = draw(st.sampled_from([b"POST"] * 12 + [b"GET", b"PUT", b"HEAD"]))
    body, coding = _encode(body, draw(st.sampled_from(_CODINGS)) if draw(st.booleans()) else "")
    extra, effect = draw(_head_extras())
    headers = [(b"Content-Type", ctype)] if ctype else []
    headers += [(b"Content-Encoding", coding)] if coding else []
    te = draw(st.sampled_from([None] * 8 + [b"chunked", b"gzip, chunked"]))
    first = _request(method, path, headers + extra, body, chunked=te)
    case = draw(_framing(first))
    case.what = f"{kind} {case.what} {effect} {coding.decode()} {te}"
    _refused_first(case, effect)
    if method == b"HEAD":
        case.answers = None
    return case


def _refused_first(case: Case, effect: str) -> None:
    """A head over the bound is refused while the client may still be sending it: the answer
    may reach it only as a reset."""
    if effect in ("big", "many"):
        case.answers = None


def _valid_serve_request(tag: str) -> bytes:
    spans = genai_spans(tag, 2)
    if int(tag.rsplit("-", 1)[1]) % 2:
        return _request(
            b"POST", b"/v1/traces", [(b"Content-Type", b"application/x-protobuf")], traces_pb(spans)
        )
    body = orjson.dumps(traces_json_doc(spans))
    return _request(b"POST", b"/v1/traces", [(b"Content-Type", b"application/json")], body)  # fmt: skip


def test_serve_survives_generated_hostile_requests(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'facts.db'}"
    inflight, workers = 4, 1
    srv: ServerProcess = start_server(
        url, tmp_path / "serve.log", "--workers", str(workers), "--max-inflight", str(inflight),
        "--max-body-size", f"{BODY_LIMIT}",
    )  # fmt: skip
    run = Run()
    try:
        (worker,) = _workers(srv.proc.pid)
        for i in range(4):  # what the first requests load (translators, store) is not a leak
            run.outcomes.append(exchange(srv.port, Case("warm", _valid_serve_request(f"warm-{i}"))))
        base = {p: _rss_kib(p, "VmRSS") for p in (srv.proc.pid, worker)}

        def valid(n: int) -> tuple[Case, str]:
            return Case("valid", _valid_serve_request(f"valid-{n}")), f"valid-{n}"

        elapsed = run.drive(srv.port, _serve_case(), valid, b"POST /v1/traces HTTP/1.1\r\n")
        peak = {p: _rss_kib(p, "VmHWM") for p in base}
    finally:
        assert srv.stop() == 0
    run.check(frozenset({503}), srv.events(), "request")
    # Valid requests sent between the others are all stored.
    with open_store(url) as store:
        ids = {f.inference_call_id for f in store.iter_facts()}
    wanted = {s.call_id for tag in run.valid for s in genai_spans(tag, 2)}
    assert wanted <= ids, len(wanted - ids)
    # Memory (docs/serve.md): the event loop holds the bodies of the requests admitted (each
    # also pickled once for its worker), a bounded head per connection and the store's page
    # cache (SQLite: 64 MiB at most, and never more than the store); a worker holds one
    # request: its body inflated and its decoded form (at worst 30 times the body, for a body
    # of nothing but empty values). 16 MiB of slack per process for the allocator's arenas.
    slack = 16 * 1024
    store_bytes = sum(p.stat().st_size for p in tmp_path.glob("facts.db*"))
    loop_bound = (
        inflight * 2 * BODY_LIMIT + 8 * (HEAD.max_bytes + READ) + min(64 << 20, store_bytes)
    ) // 1024
    worker_bound = 32 * BODY_LIMIT // 1024
    grew = {p: peak[p] - base[p] for p in base}
    assert grew[srv.proc.pid] <= loop_bound + slack, grew
    assert grew[worker] <= worker_bound + slack, grew
    print(
        f"\nserve fuzz: {len(run.outcomes)} requests, {len(run.valid)} valid, {elapsed:.1f} s; "
        f"statuses {dict(sorted(run.statuses.items()))}; memory grew {grew[srv.proc.pid]} KiB "
        f"(loop, bound {loop_bound + slack}), {grew[worker]} KiB (worker, bound "
        f"{worker_bound + slack})"
    )


# -- proxy ----------------------------------------------------------------------------------------

_ROUTES = [
    b"/v1/chat/completions",
    b"/v1/responses",
    b"/v1/messages",
    b"/v1beta/models/gemini-2.5-flash:generateContent",
    b"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
]
_NOT_ROUTES = [
    b"/v1/chat%2Fcompletions",
    b"/v1/chat/completions/",
    b"/v1/embeddings",
    b"/v1/projects/../locations/x/publishers/google/models/m:generateContent",
    b"/",
    b"*",
    b"http://evil.example/v1/chat/completions",
]


def _chat(n: int) -> bytes:
    return orjson.dumps(
        {
            "id": f"chatcmpl-fuzz{n}",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {n}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    )  # fmt: skip


def _upstream_reply(seen: Seen) -> Scripted:
    return Scripted(chunks=[_chat(int(seen.header("x-test-n") or 0))])


@st.composite
def _proxy_case(draw: st.DrawFn) -> Case:
    path = draw(st.sampled_from(_ROUTES * 3 + _NOT_ROUTES))
    body = draw(
        st.one_of(
            st.recursive(_JUNK, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["model", "messages", "role", "content", "stream", "contents", "input"]), c, max_size=4), max_leaves=12).map(lambda d: json.dumps(d).encode()),
            st.binary(max_size=64),
            st.sampled_from([b"", b"{", b'{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}']),
        )
    )  # fmt: skip
    method = draw(st.sampled_from([b"POST"] * 12 + [b"GET", b"DELETE", b"OPTIONS"]))
    coding = draw(st.sampled_from(["", "", "", "gzip", "not gzip"]))
    body, cbytes = _encode(body, coding)
    extra, effect = draw(_head_extras())
    headers = [(b"Content-Type", b"application/json")]
    headers += [(b"Content-Encoding", cbytes)] if cbytes else []
    te = draw(st.sampled_from([None] * 8 + [b"chunked", b"gzip, chunked"]))
    case = draw(_framing(_request(method, path, headers + extra, body, chunked=te)))
    case.what = f"proxy {case.what} {path.decode()} {effect} {te}"
    _refused_first(case, effect)
    if case.half_close:
        case.answers = None  # a FIN is a client giving up the call: it may come too late
    return case


def test_proxy_survives_generated_hostile_requests(tmp_path: Path) -> None:
    with Upstream(_upstream_reply) as upstream:
        proxy: ProxyProcess = start_proxy(
            tmp_path, {"openai": upstream.url, "anthropic": upstream.url, "gemini": upstream.url},
            "--max-body-size", f"{BODY_LIMIT}", "--max-record-size", f"{BODY_LIMIT}",
        )  # fmt: skip
        run = Run()
        try:
            valid_body = orjson.dumps(
                {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
            )

            def valid(n: int) -> tuple[Case, str]:
                headers = [(b"Content-Type", b"application/json"), (b"X-Test-N", b"%d" % n)]
                request = _request(b"POST", b"/v1/chat/completions", headers, valid_body)
                return Case("valid", request), f"chatcmpl-fuzz{n}"

            for i in range(4):
                run.outcomes.append(exchange(proxy.port, valid(10**8 + i)[0]))
            base = _rss_kib(proxy.proc.pid, "VmRSS")
            head = b"POST /v1/chat/completions HTTP/1.1\r\n"
            elapsed = run.drive(proxy.port, _proxy_case(), valid, head)
            peak = _rss_kib(proxy.proc.pid, "VmHWM")
            deadline = time.monotonic() + 60
            ids: set[str | None] = set()
            while not set(run.valid) <= ids and time.monotonic() < deadline:
                time.sleep(0.5)
                # The recorder writes as the test reads: a busy store is tried again.
                with contextlib.suppress(StoreUnavailable), open_store(proxy.store) as store:
                    ids = {f.model_call_id for f in store.iter_facts()}
        finally:
            assert proxy.stop() == 0
    _settled(proxy.log)
    run.check(frozenset(), proxy.events(), "exchange", "refused")
    assert set(run.valid) <= ids, len(set(run.valid) - ids)
    # Memory (docs/proxy.md): each call in flight holds its body and, recorded, its response;
    # a head is bounded per connection. One call at a time here, and the slow clients' heads.
    slack = 16 * 1024
    bound = (2 * BODY_LIMIT + 8 * (HEAD.max_bytes + READ)) // 1024
    assert peak - base <= bound + slack, (peak, base)
    print(
        f"\nproxy fuzz: {len(run.outcomes)} requests, {len(run.valid)} valid, {elapsed:.1f} s; "
        f"statuses {dict(sorted(run.statuses.items()))}; memory grew {peak - base} KiB (bound "
        f"{bound + slack})"
    )
