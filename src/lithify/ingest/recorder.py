"""The proxy's recorder: spooled exchanges → facts → the store, in a process of its own.

The proxy only forwards and appends exchanges to the spool (spool.py). This process reads them
in order, translates each one exactly as `lithify convert` translates the same exchange document
(``exchange_document``), inserts the facts in batches, and only then moves the spool's cursor:
an exchange is consumed once its fact is committed (or it gave no fact). While the store is
down the exchanges wait in the spool and are retried; an exchange read again after a crash is a
duplicate the store refuses by identity, never a second fact.

Running apart from the proxy keeps translation and store I/O off the process that serves the
clients (no GIL shared with the event loop), and a store that hangs cannot stall forwarding.

One module past 500 lines: the recorder process and the proxy's handle on it (start, status,
restart, stop) speak one protocol over one pipe.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.config
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import msgspec

from lithify.core.text import loads
from lithify.ingest.processing import _ENCODING_ALIASES, BadBody, BodyTooLarge, inflate
from lithify.ingest.spool import SpoolReader, store_key
from lithify.model import InferenceCall, Skip
from lithify.store import (
    FactStore,
    InsertResult,
    StoreError,
    StoreUnavailable,
    display_url,
    open_store,
)
from lithify.translate import translate_document
from lithify.translate.sse import looks_like_sse

log = logging.getLogger("lithify.proxy")

# How an exchange ended, as the proxy saw it.
OUTCOMES = ("complete", "upstream_cut", "client_gone", "timeout", "shutdown")
# Exchanges that give no fact by design (an error answer); any other skip lost a call.
EXPECTED_SKIPS = frozenset({"error_response"})


class SpooledExchange(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One exchange as the proxy spools it. Never any request header: credentials travel in
    headers, and only the bodies (which the translators redact) and the session are kept."""

    kind: str  # the translator: openai-chat, openai-responses, anthropic, gemini
    url: str  # the upstream URL called, credential query parameters removed
    observed_at: str  # RFC 3339, when the request reached the proxy
    duration_ms: float  # from the request reaching the proxy to the end of the response
    outcome: str  # one of OUTCOMES
    status: int = 0  # the upstream's HTTP status
    session_id: str | None = None  # from x-lithify-session
    model: str | None = None  # the model named by the path (Gemini)
    request: bytes = b""
    request_encoding: str = ""
    response: bytes = b""
    response_type: str = ""
    response_encoding: str = ""
    v: int = 1


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SpooledExchange)


def encode_exchange(x: SpooledExchange) -> bytes:
    return _encoder.encode(x)


def decode_exchange(data: bytes) -> SpooledExchange:
    return _decoder.decode(data)


# What the recorder inflates a body to at most: a small compressed body may claim gigabytes.
INFLATED_LIMIT = 256 << 20
# What clients and providers compress bodies with; the receiver's decoders read them all.
_RECORDABLE = frozenset({"gzip", "deflate", "zstd", "br"})


def decode_body(data: bytes, encoding: str) -> bytes | None:
    """A body without its Content-Encoding; a cut-off compressed body gives what it holds. None
    for an encoding lithify cannot read, bytes that decode to nothing, or a body that inflates
    past ``INFLATED_LIMIT``."""
    enc = encoding.strip().lower()
    enc = _ENCODING_ALIASES.get(enc, enc)
    if enc in ("", "identity"):
        return data
    if enc not in _RECORDABLE:
        return None
    try:
        return inflate(data, enc, INFLATED_LIMIT, partial=True)
    except (BodyTooLarge, BadBody):
        return None


def json_array_prefix(body: bytes) -> list[Any] | None:
    """The whole elements of a JSON array cut short, None when there are none. Gemini's
    streamGenerateContent without ``alt=sse`` streams one array, element by element: cut by
    the client or the upstream, its chunks so far are the stream as far as it got (the
    translator counts it ``truncated_stream``), not an undecodable body."""
    text = body.decode("utf-8", "surrogateescape")  # one char per undecodable byte
    decoder = json.JSONDecoder()
    i = _skip_ws(text, 0)
    if not text.startswith("[", i):
        return None
    i, end = _skip_ws(text, i + 1), 0
    while i < len(text) and text[i] != "]":
        try:
            _, j = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            break
        end, i = j, _skip_ws(text, j)
        if not text.startswith(",", i):
            break
        i = _skip_ws(text, i + 1)
    if not end:
        return None
    # The same reader as a whole body (core.text: lone surrogate escapes kept), on the prefix.
    head = text[:end].encode("utf-8", "surrogateescape")
    try:
        chunks = loads(head + b"]")[0]
    except (ValueError, RecursionError):
        return None
    return chunks if isinstance(chunks, list) and chunks else None


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def exchange_document(x: SpooledExchange) -> dict[str, Any] | Skip:
    """The exchange as the document `lithify convert` reads (``{"request", "response",
    "provider", "meta"}``), or why it cannot be one."""
    request_body = decode_body(x.request, x.request_encoding)
    response_body = decode_body(x.response, x.response_encoding)
    if request_body is None or response_body is None:
        enc = x.request_encoding if request_body is None else x.response_encoding
        return Skip("undecodable", f"content-encoding {enc!r} cannot be read", x.kind)
    try:
        # Lone surrogate escapes are read (core.text): the translator makes the text valid.
        request = loads(request_body)[0] if request_body.strip() else None
    except (ValueError, RecursionError):
        return Skip("undecodable", "the request body is not JSON", x.kind)
    response: Any
    if "text/event-stream" in x.response_type.lower():
        # Bytes that are not UTF-8 as lone surrogates: the translator replaces and counts them.
        response = response_body.decode("utf-8", "surrogateescape")
    else:
        try:
            response = loads(response_body)[0]
        except (ValueError, RecursionError):
            if x.status >= 400:
                return Skip("error_response", f"HTTP {x.status} from the upstream", x.kind)
            text = response_body.decode("utf-8", "surrogateescape")
            # The SDKs read a stream they asked for whatever it is labelled: a gateway or a
            # self-hosted server may call it application/json, text/plain or nothing.
            if looks_like_sse(text):
                response = text
            elif (chunks := json_array_prefix(response_body)) is not None:
                response = chunks
            else:
                what = "cut off" if x.outcome != "complete" else "not JSON"
                return Skip("undecodable", f"the response body is {what} ({x.outcome})", x.kind)
    meta: dict[str, Any] = {
        "url": x.url,
        "observed_at": x.observed_at,
        "duration_ms": x.duration_ms,
    }
    if x.session_id:
        meta["session_id"] = x.session_id
    if x.model:
        meta["model"] = x.model
    return {"request": request, "response": response, "provider": x.kind, "meta": meta}


def translate_spooled(x: SpooledExchange) -> InferenceCall | Skip:
    """The fact of one exchange: what `lithify convert` gives for its exchange document; an
    error status never gives a fact."""
    doc = exchange_document(x)
    if isinstance(doc, Skip):
        return doc
    result = next(iter(translate_document(doc)), None)
    if result is None:
        return Skip("empty", "the exchange gave nothing", x.kind)
    if x.status >= 400 and not (isinstance(result, Skip) and result.reason == "error_response"):
        return Skip("error_response", f"HTTP {x.status} from the upstream", x.kind)
    if not isinstance(result, InferenceCall | Skip):
        return Skip("unrecognized_format", "not a model call", x.kind)
    return result


# ---------------------------------------------------------------------------------------------
# the recorder loop


@dataclass(frozen=True)
class RecorderConfig:
    spool: str
    store: str | None
    batch_records: int = 256
    batch_bytes: int = 16 << 20
    idle_poll: float = 0.02  # seconds between looks at an idle spool
    max_backoff: float = 2.0  # seconds between store retries, at most
    drain_timeout: float = 5.0  # seconds to keep recording after a stop request
    log_level: str = "info"


@dataclass
class RecorderStatus:
    store: str = ""
    available: bool = False
    error: str | None = None
    exchanges: int = 0  # exchanges read from the spool and translated
    facts_stored: int = 0
    duplicates: int = 0  # facts the store already held (a replay after a crash, a retry)
    variants: int = 0  # other captures of stored calls, kept apart (docs/store.md)
    id_collisions: int = 0  # new calls sharing an id with a call they contradict (docs/store.md)
    degraded: int = 0  # stored facts with at least one degradation
    rejected: int = 0  # facts the store refused for a reason other than being down
    skipped: dict[str, int] = field(default_factory=dict)  # exchanges that gave no fact
    outcomes: dict[str, int] = field(default_factory=dict)
    backlog_bytes: int = 0
    torn: int = 0
    corrupt: int = 0
    pid: int = 0

    def as_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def _event(level: int, event: str, **fields: Any) -> None:
    log.log(level, event, extra={"fields": fields})


class Recorder:
    """Consumes the spool into the store; ``conn`` (when run as a child) carries ``"stop"``
    in and status dicts out."""

    def __init__(self, config: RecorderConfig, conn: Connection | None = None) -> None:
        self.config = config
        self.conn = conn
        # Refuses a spool that belongs to another store (the proxy checked it at start too).
        self.reader = SpoolReader(config.spool, store=store_key(config.store))
        self.store: FactStore | None = None
        url = config.store
        self.status = RecorderStatus(store=display_url(url) if url else "(default)")
        self.skipped: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.stopping = False
        self._stop_deadline = float("inf")
        self._down_logged = False

    # -- control -------------------------------------------------------------------------------
    def _wait(self, seconds: float) -> None:
        """Sleep, but wake for a stop request."""
        if self.conn is None:
            time.sleep(seconds)
            return
        try:
            if self.conn.poll(seconds):
                msg = self.conn.recv()
                if msg == "stop" and not self.stopping:
                    self.stopping = True
                    self._stop_deadline = time.monotonic() + self.config.drain_timeout
        except (EOFError, OSError):
            # The proxy is gone: finish what can be finished quickly, then stop.
            if not self.stopping:
                self.stopping = True
                self._stop_deadline = time.monotonic() + self.config.drain_timeout

    def _expired(self) -> bool:
        return self.stopping and time.monotonic() > self._stop_deadline

    def publish(self) -> None:
        st = self.status
        st.skipped = dict(self.skipped)
        st.outcomes = dict(self.outcomes)
        st.torn, st.corrupt = self.reader.stats.torn, self.reader.stats.corrupt
        st.backlog_bytes = self.reader.backlog()[0]
        if self.conn is not None:
            with contextlib.suppress(OSError, EOFError, BrokenPipeError):
                self.conn.send(st.as_dict())

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        self.status.pid = os.getpid()
        self._open()
        self.publish()
        while True:
            done = self.step()
            if self.stopping and (done == 0 or self._expired()):
                break
            if done == 0:
                self._wait(self.config.idle_poll)
        self.publish()
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.close()

    def drain(self) -> None:
        """Record everything spooled now (for callers that run the recorder in-process)."""
        while self.step():
            pass

    def step(self) -> int:
        """Read, translate and store one batch; the number of exchanges consumed."""
        batch = self.reader.read(self.config.batch_records, self.config.batch_bytes)
        if not batch:
            if self.reader.position != self.reader.committed:
                self.reader.commit(self.reader.position)  # moved past finished segments
                self.publish()
            return 0
        facts: list[InferenceCall] = []
        for payload, _ in batch:
            result = self._translate(payload)
            if isinstance(result, InferenceCall):
                facts.append(result)
        if facts and not self._store(facts):
            # Stopping while the store is down: leave the batch in the spool for next time.
            self.reader.rewind()
            return 0
        self.reader.commit(self.reader.position)
        self.status.exchanges += len(batch)
        self.publish()
        return len(batch)

    def _translate(self, payload: bytes) -> InferenceCall | Skip:
        try:
            x = decode_exchange(payload)
        except msgspec.DecodeError as e:
            self.skipped["undecodable"] += 1
            _event(logging.WARNING, "spool_record_undecodable", error=str(e)[:200])
            return Skip("undecodable", "a spool record that is not an exchange")
        self.outcomes[x.outcome] += 1
        try:
            result = translate_spooled(x)
        except Exception as e:  # translators never raise; a defect still must not stop us
            result = Skip("translator_error", f"{type(e).__name__}: {e}"[:300], x.kind)
        if isinstance(result, Skip):
            self.skipped[result.reason] += 1
            _event(
                logging.INFO if result.reason in EXPECTED_SKIPS else logging.WARNING,
                "exchange_not_recorded",
                kind=x.kind,
                status=x.status,
                outcome=x.outcome,
                reason=result.reason,
                detail=result.detail,
            )
        return result

    def _open(self) -> FactStore | None:
        if self.store is not None:
            return self.store
        try:
            self.store = open_store(self.config.store)
        except StoreError as e:  # unreachable, or unusable for now: retried with backoff
            self._down(e)
            return None
        self.status.store = self.store.url
        self._up()
        return self.store

    def _down(self, e: BaseException) -> None:
        if self.status.available or not self._down_logged:
            _event(logging.WARNING, "store_unavailable", store=self.status.store, error=str(e))
            self._down_logged = True
        self.status.available, self.status.error = False, str(e)
        self.publish()

    def _up(self) -> None:
        if not self.status.available:
            _event(logging.INFO, "store_available", store=self.status.store)
        self.status.available, self.status.error, self._down_logged = True, None, False

    def _store(self, facts: list[InferenceCall]) -> bool:
        """Insert until it succeeds; False when stopping while the store stays down."""
        backoff = 0.1
        while True:
            store = self._open()
            if store is not None:
                try:
                    result = store.insert_facts(facts)
                except StoreUnavailable as e:
                    self._down(e)
                except Exception as e:
                    if len(facts) == 1:
                        self._reject(facts[0], e)
                        return True
                    # One bad fact must cost only itself: insert each alone.
                    _event(logging.ERROR, "batch_refused", error=f"{type(e).__name__}: {e}"[:300])
                    return all(self._store([fact]) for fact in facts)
                else:
                    self._up()
                    self._count(facts, result)
                    return True
            # Stopping with the store down: the spool keeps the batch for the next start.
            if self.stopping or self._expired():
                return False
            self._wait(backoff)
            backoff = min(backoff * 2, self.config.max_backoff)

    def _reject(self, fact: InferenceCall, e: Exception) -> None:
        self.status.rejected += 1
        _event(
            logging.ERROR,
            "fact_rejected",
            inference_call_id=fact.inference_call_id,
            error=f"{type(e).__name__}: {e}"[:300],
        )

    def _count(self, facts: list[InferenceCall], result: InsertResult) -> None:
        self.status.facts_stored += result.inserted
        self.status.duplicates += result.duplicates
        self.status.variants += result.variants
        self.status.id_collisions += result.collisions
        dup = set(result.duplicate_ids)
        self.status.degraded += sum(
            1 for f in facts if f.degradations and f.inference_call_id not in dup
        )
        _event(
            logging.DEBUG,
            "recorded",
            facts=result.inserted,
            duplicates=result.duplicates,
            variants=result.variants,
            id_collisions=result.collisions,
        )


def _child_init() -> None:
    """Die with the proxy, and leave SIGINT/SIGTERM to it: it asks us to stop once it has
    stopped taking requests, so that what they spooled is recorded."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    # Behind the proxy for the CPU: when both want it, forwarding wins and the spool absorbs
    # the difference until the recorder catches up.
    with contextlib.suppress(OSError):
        os.nice(10)


def recorder_main(config: RecorderConfig, conn: Connection, logging_config: dict[str, Any]) -> None:
    _child_init()
    logging.config.dictConfig(logging_config)
    Recorder(config, conn).run()


# ---------------------------------------------------------------------------------------------
# the proxy's side


class RecorderProcess:
    """The recorder as a child process: started with the proxy, restarted if it dies, asked to
    drain and stop when the proxy stops."""

    def __init__(self, config: RecorderConfig, logging_config: dict[str, Any]) -> None:
        self.config = config
        self.logging_config = logging_config
        url = config.store
        # Until the child first reports, the backlog is what the spool holds on disk: never 0
        # for a spool with unrecorded exchanges (a health check waiting for an idle recorder
        # must not pass before the recorder has looked).
        backlog = 0
        with contextlib.suppress(OSError):  # an unreadable spool fails the recorder, not this
            backlog = SpoolReader(config.spool).backlog()[0]
        self.status: dict[str, Any] = RecorderStatus(
            store=display_url(url) if url else "(default)", backlog_bytes=backlog
        ).as_dict()
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        self._proc = self._ctx.Process(
            target=recorder_main,
            args=(self.config, child, self.logging_config),
            name="lithify-recorder",
            daemon=True,
        )
        self._proc.start()
        child.close()
        self._conn = parent
        self._thread = threading.Thread(target=self._listen, args=(parent,), daemon=True)
        self._thread.start()

    def _listen(self, conn: Connection) -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError, TypeError):
                # TypeError: the proxy closed the connection under this thread at shutdown
                # (multiprocessing then reads from a handle that is None).
                return
            if isinstance(msg, dict):
                self.status = msg

    def check(self) -> bool:
        """Restart the recorder if it died; True when it had to."""
        if self._stopping or self._proc is None or self._proc.is_alive():
            return False
        code = self._proc.exitcode
        _event(logging.ERROR, "recorder_died", exitcode=code, restarts=self.restarts + 1)
        self._close_conn()
        self.restarts += 1
        self.start()
        return True

    def stop(self, timeout: float | None = None) -> None:
        """Ask it to record what is spooled (up to its drain timeout), then wait for it."""
        self._stopping = True
        if self._proc is None:
            return
        if self._conn is not None:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send("stop")
        wait = timeout if timeout is not None else self.config.drain_timeout + 5
        self._proc.join(wait)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)
        if self._thread is not None:
            self._thread.join(1)
        self._close_conn()

    def _close_conn(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
