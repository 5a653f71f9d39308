"""OTLP/gRPC for `lithify serve` (docs/serve.md): ``TraceService/Export`` and ``LogsService/Export``
served by ``grpc.aio`` on the receiver's own event loop, a thin transport over the HTTP face's
path: the same admission (token, store, ``--max-inflight``), the same processing in the worker
pool, the same group-committed writer, the answer only after the commit (``receiver.Receiver``).

A request is taken as raw bytes (no deserializer): the pool decodes it one span or log record at
a time, so a malformed span costs only itself (partial success), where gRPC's own parse would
refuse the whole call. gzip is gRPC's message compression: the bytes arrive inflated, bounded by
``grpc.max_receive_message_length``. grpcio decodes gzip and deflate only: a call with another
``grpc-encoding`` (a Collector's ``compression: zstd``) is answered ``INTERNAL`` by grpcio itself
before any handler here runs (docs/serve.md, OTLP/gRPC).

Refusals keep the HTTP face's reasons and map to the OTLP/gRPC codes; a retryable one carries
``google.rpc.RetryInfo`` in the ``grpc-status-details-bin`` status details (the specification's
place) and, for the Python SDK, which reads no other, in ``google.rpc.retryinfo-bin``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from lithify.ingest._server import ServerFailed
from lithify.ingest.logs import _event
from lithify.ingest.receiver import Receiver, Refused, Taken, export_body

# The services as opentelemetry-proto declares them (the names its generated stubs call).
SERVICES = {
    "traces": trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    "logs": logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}

# The HTTP face's statuses as OTLP/gRPC codes. A request over --max-body-size in units (413) is
# INVALID_ARGUMENT, not RESOURCE_EXHAUSTED: the OTel SDKs retry the latter whatever it carries,
# and the same batch would only be refused again.
CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,  # with RetryInfo: retryable (the spec's throttling)
    500: grpc.StatusCode.INTERNAL,
    503: grpc.StatusCode.UNAVAILABLE,
}


def trailers(refused: Refused, code: grpc.StatusCode) -> tuple[tuple[str, bytes], ...]:
    """The trailing metadata of a refusal: a google.rpc.Status with RetryInfo when a retry may
    succeed after ``retry_after`` seconds."""
    status = status_pb2.Status(code=code.value[0], message=refused.message)
    if refused.retry_after is None:
        return (("grpc-status-details-bin", status.SerializeToString()),)
    info = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=refused.retry_after))
    status.details.add().Pack(info)
    return (
        ("grpc-status-details-bin", status.SerializeToString()),
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
    )


def _client(peer: str) -> str:
    """``ipv4:127.0.0.1:53906`` / ``ipv6:[::1]:53906`` → the address and port."""
    return peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer


class GrpcFace:
    """The gRPC server of one receiver: started in the app's lifespan, stopped before it."""

    def __init__(self, rx: Receiver, server: grpc.aio.Server) -> None:
        self.rx = rx
        self.server = server

    @classmethod
    async def start(cls, rx: Receiver, host: str, port: int) -> GrpcFace:
        config = rx.config
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", config.max_body_size),
                # gRPC sets SO_REUSEPORT by default: a second server (a Collector on 4317) would
                # then share the port silently instead of failing to bind.
                ("grpc.so_reuseport", 0),
            ],
            # Every call's message is buffered before it reaches a handler: past twice the
            # admitted requests, gRPC refuses calls itself, so memory stays bounded as on HTTP.
            maximum_concurrent_rpcs=2 * config.max_inflight,
        )
        face = cls(rx, server)
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    service, {"Export": grpc.unary_unary_rpc_method_handler(face._method(signal))}
                )
                for signal, service in SERVICES.items()
            ]
        )
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(address)
        except RuntimeError:  # grpcio raises where older versions returned 0; its text is vague
            bound = 0
        if not bound:
            error = "address already in use, or not an address of this machine"
            _event(logging.ERROR, "grpc_bind_failed", address=address, error=error)
            raise ServerFailed(f"cannot listen for OTLP/gRPC on {address}: {error}")
        await server.start()
        rx.grpc_port = bound
        return face

    async def stop(self, grace: float) -> None:
        """Refuse new calls, let those in flight finish (up to ``grace`` seconds)."""
        await self.server.stop(grace)

    def _method(self, signal: str) -> Any:
        path = f"/{SERVICES[signal]}/Export"

        async def export(body: bytes, context: grpc.aio.ServicerContext) -> bytes:
            # Shielded: a call cancelled by its client (a deadline) still finishes what it
            # started, so the writer's future is never cancelled under it and the log says how
            # it ended; the client retries and the store deduplicates.
            task = asyncio.ensure_future(self._take(signal, path, body, context))
            done = await asyncio.shield(task)
            if isinstance(done, Refused):
                code = CODES.get(done.status, grpc.StatusCode.INTERNAL)
                await context.abort(code, done.message, trailers(done, code))
            return export_body(signal, "protobuf", done.out.rejected, done.message)

        return export

    async def _take(
        self, signal: str, path: str, body: bytes, context: grpc.aio.ServicerContext
    ) -> Refused | Taken:
        rx = self.rx
        t0 = time.perf_counter()
        info: dict[str, Any] = {"method": "POST", "path": path, "transport": "grpc"}
        info["client"] = _client(context.peer())
        info["signal"] = signal
        # (gRPC inflates a compressed message before this and shows no grpc-encoding here.)
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        info["content_type"] = "protobuf"
        done: Refused | Taken | None = await rx.admit_token(metadata.get("authorization"), info)
        done = done or rx.admit_capacity()
        if done is None:
            rx.inflight += 1
            try:
                info["bytes"] = len(body)
                done = await rx.ingest_body(signal, "protobuf", body, "", info)
            finally:
                rx.inflight -= 1
        info["latency_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        if isinstance(done, Refused):
            code = CODES.get(done.status, grpc.StatusCode.INTERNAL)
            info.update(status=done.status, grpc_status=code.name, error=done.message)
        else:
            info["grpc_status"] = "OK"
        rx.log_request(info)
        return done
