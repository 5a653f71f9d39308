"""The viewer's ASGI app: routes, each HTML page beside its JSON twin, curation, login.

Every page is a Jinja2 template (autoescaped) over the data ``views`` builds; the twin at
``/api/…`` answers that data as JSON (docs/ui.md, Pages and their JSON twins). Store calls
block, so the endpoints are plain functions Starlette runs in its thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lithify import __version__
from lithify.store import FactStore, FeedbackValue, StoreError
from lithify.ui import listing, views
from lithify.ui.security import COOKIE, CSRF_FIELD, Guard, middleware, read_form

REFRESH = 2.0  # seconds between reloads of the store's tokens (beyond loopback)
CLIP = 20_000  # characters of one text shown in a page; the JSON twin has all of it


@dataclass
class UiConfig:
    host: str = "127.0.0.1"
    port: int = 8765


def _json_bytes(data: Any) -> bytes:
    try:
        return orjson.dumps(data, default=str)
    except TypeError:  # integers beyond 64 bits, lone surrogates: the stdlib writes both
        return json.dumps(data, default=str).encode()


def _pretty(value: Any) -> str:
    """A value as indented JSON, for tool arguments and results."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except ValueError:
        return repr(value)


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("lithify.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = _pretty
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.filters["urlencode_filter"] = lambda d: urlencode(
        {k: v for k, v in d.items() if k not in views.EXPORT_KEYS}
    )
    env.filters["clip"] = lambda s: s if len(s) <= CLIP else s[:CLIP]
    env.filters["num"] = lambda n: "" if n is None else f"{n:,}"
    env.filters["bytes"] = _human_bytes
    env.globals["CLIP"] = CLIP
    env.globals["chart"] = views.chart
    env.globals["EXPORT_KEYS"] = views.EXPORT_KEYS
    env.globals["DEGRADATION_REASONS"] = views.DEGRADATION_REASONS
    env.globals["version"] = __version__
    return env


def _human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n, 1024)), 4)
    return f"{n / 1024**exp:.1f} {'KMGT'[exp - 1]}iB"


def build_app(store: FactStore, config: UiConfig | None = None) -> Starlette:
    """The viewer over ``store``; ``config.host`` decides whether a token is required."""
    from lithify.ui.security import is_loopback

    config = config or UiConfig()
    guard = Guard(loopback=is_loopback(config.host))
    env = _env()

    def html(
        request: Request, template: str, data: Any, status: int = 200, **extra: Any
    ) -> Response:
        query = f"?{request.url.query}" if request.url.query else ""
        twin: str | None = "/api" + request.url.path + query
        if request.url.path == "/":
            twin = "/api/overview"
        elif request.method != "GET" or request.url.path == "/login":
            twin = None  # a form's answer and the sign-in page have no page of data to fetch
        body = env.get_template(template).render(
            data=data,
            csrf=guard.csrf,
            user=request.state.user,
            twin=twin,
            path=request.url.path,
            **extra,
        )
        # Text from telemetry may hold lone surrogates, which UTF-8 cannot: shown as U+FFFD.
        return Response(
            body.encode("utf-8", "replace"),
            status,
            media_type="text/html; charset=utf-8",
            headers={"cache-control": "no-store"},
        )

    def api(data: Any, status: int = 200) -> Response:
        return Response(
            _json_bytes(data),
            status,
            media_type="application/json",
            headers={"cache-control": "no-store"},
        )

    def not_found(request: Request, what: str) -> Response:
        if request.url.path.startswith("/api/"):
            return api({"error": f"no {what}"}, 404)
        return html(request, "error.html", {"status": 404, "message": f"no {what}"}, 404)

    def bad(request: Request, message: str, status: int = 400) -> Response:
        if request.url.path.startswith("/api/"):
            return api({"error": message}, status)
        return html(request, "error.html", {"status": status, "message": message}, status)

    # -- pages ---------------------------------------------------------------------------------
    def overview_page(request: Request) -> Response:
        data = views.overview(store)
        return (
            api(data)
            if request.url.path.startswith("/api/")
            else html(request, "overview.html", data)
        )

    def sessions_page(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            data = listing.sessions(store, params)
        except ValueError as e:
            return bad(request, str(e))
        if request.url.path.startswith("/api/"):
            return api(data)
        more = None
        if data["next"]:
            more = "/sessions?" + urlencode({**data["filter"], "after": data["next"]})
        return html(request, "sessions.html", data, params=params, more=more)

    def session_page(request: Request) -> Response:
        sid = request.path_params["session_id"]
        data = views.session(store, sid)
        if data is None:
            return not_found(request, f"session {sid!r}")
        if request.url.path.startswith("/api/"):
            return api(data)
        return html(request, "session.html", data)

    def call_page(request: Request) -> Response:
        cid = request.path_params["call_id"]
        data = views.call(store, cid)
        if data is None:
            return not_found(request, f"call {cid!r}")
        if request.url.path.startswith("/api/"):
            return api(data)
        return html(request, "call.html", data)

    def rows_page(request: Request) -> Response:
        try:
            req = views.rows_request(dict(request.query_params))
            template = views.chat_template(dict(request.query_params))
        except ValueError as e:
            return bad(request, str(e))
        data = views.rows(store, req, template)
        if data is None:
            return not_found(request, f"session {req.sessions[0]!r}")
        if request.url.path.startswith("/api/"):
            return api(data)
        return html(request, "rows.html", data)

    def export_page(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            req = views.selection_request(store, params)
        except ValueError as e:
            return bad(request, str(e))
        data = views.export_selection(store, req)
        data["download"] = "/export.zip?" + urlencode(params)
        if request.url.path.startswith("/api/"):
            return api(data)
        return html(request, "export.html", data, params=params)

    def export_zip(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            req = views.selection_request(store, params)
        except ValueError as e:
            return bad(request, str(e))
        # Spooled to disk past 16 MiB: the archive is never held whole in memory. The response's
        # generator closes it once sent.
        spool = tempfile.SpooledTemporaryFile(max_size=16 << 20)  # noqa: SIM115
        views.export_archive(store, req, spool)
        size = spool.tell()
        spool.seek(0)

        def chunks() -> Iterator[bytes]:
            with spool:
                while chunk := spool.read(1 << 20):
                    yield chunk

        name = f"lithify-{req.kind}-{req.profile}.zip"
        return StreamingResponse(
            chunks(),
            media_type="application/zip",
            headers={
                "content-disposition": f'attachment; filename="{name}"',
                "content-length": str(size),
                "cache-control": "no-store",
            },
        )

    async def curate_selection_form(request: Request) -> Response:
        field = await read_form(request)
        query = {k: v for k, v in field.items() if k not in ("action", "value", "csrf", "next")}
        try:
            name, value = _action(field.get("action", ""), field.get("value", ""))
            done = await _threaded(
                views.curate_selection, store, query, name, value,
                views.who(request.state.user),
            )  # fmt: skip
        except ValueError as e:
            return bad(request, str(e))
        return html(request, "curated.html", done, params=query)

    async def curate_selection_api(request: Request) -> Response:
        try:
            doc = orjson.loads(await request.body())
            query, name, value = doc["filter"], doc["name"], doc["value"]
            if not isinstance(query, dict) or not all(
                isinstance(v, str) for v in query.values()
            ) or not isinstance(name, str) or not isinstance(value, bool | int | float | str) or (
                isinstance(value, float) and not math.isfinite(value)
            ):  # fmt: skip
                raise ValueError("filter is an object of strings, name a string, value a "
                                 "finite number, a boolean or a string")  # fmt: skip
            done = await _threaded(
                views.curate_selection, store, query, name, value,
                views.who(request.state.user),
            )  # fmt: skip
        except (orjson.JSONDecodeError, KeyError, TypeError) as e:
            return api({"error": f"expected {{filter, name, value}}: {e}"}, 400)
        except ValueError as e:
            return api({"error": str(e)}, 400)
        return api(done)

    def media_page(request: Request) -> Response:
        found = views.media(
            store, request.query_params.get("call", ""), request.path_params["sha256"]
        )
        if found is None:
            return not_found(request, "such media")
        body, mime = found
        return Response(
            body,
            media_type=mime or "application/octet-stream",
            headers={
                "content-disposition": "inline" if mime else "attachment",
                "cache-control": "private, max-age=86400",  # content-addressed: never changes
            },
        )

    # -- curate ----------------------------------------------------------------------------------
    def _store_label(request: Request, kind: str, target: str, name: str, value: Any) -> Any:
        return views.curate(store, kind, target, name, value, views.who(request.state.user))

    async def curate_form(request: Request) -> Response:
        field = await read_form(request)
        back = field.get("next", "/")
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/"  # only this viewer's own pages: never a redirect elsewhere
        try:
            name, value = _action(field.get("action", ""), field.get("value", ""))
            await _threaded(
                _store_label, request, field.get("target_kind", ""),
                field.get("target_id", ""), name, value,
            )  # fmt: skip
        except views.NoTarget as e:
            return bad(request, str(e), 404)
        except views.Conflict as e:
            return bad(request, str(e), 409)
        except ValueError as e:
            return bad(request, str(e))
        return RedirectResponse(back, 303)

    async def curate_api(request: Request) -> Response:
        try:
            doc = orjson.loads(await request.body())
            kind, target, name = doc["target_kind"], doc["target_id"], doc["name"]
            value: FeedbackValue = doc["value"]
            if not all(isinstance(x, str) for x in (kind, target, name)) or not isinstance(
                value, bool | int | float | str
            ) or (isinstance(value, float) and not math.isfinite(value)):  # fmt: skip
                raise ValueError("target_kind, target_id and name are strings; value a finite "
                                 "number, a boolean or a string")  # fmt: skip
            stored = await _threaded(_store_label, request, kind, target, name, value)
        except (orjson.JSONDecodeError, KeyError, TypeError) as e:
            return api({"error": f"expected {{target_kind, target_id, name, value}}: {e}"}, 400)
        except views.NoTarget as e:
            return api({"error": str(e)}, 404)
        except views.Conflict as e:
            return api({"error": str(e)}, 409)
        except ValueError as e:
            return api({"error": str(e)}, 400)
        return api(stored, 201 if stored["stored"] else 200)

    def csrf_api(request: Request) -> Response:
        return api({"csrf": guard.csrf, "field": CSRF_FIELD, "header": "X-CSRF-Token"})

    # -- login (only when a token is required) -------------------------------------------------
    async def login(request: Request) -> Response:
        if request.method == "GET":
            return html(request, "login.html", {"required": guard.token_required})
        token = (await read_form(request)).get("token", "").strip()
        if not guard.tokens.check(f"Bearer {token}"):
            guard.reload(store)
        if not token or not guard.tokens.check(f"Bearer {token}"):
            return html(request, "login.html", {"required": True, "failed": True}, 401)
        response = RedirectResponse("/", 303)
        # HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it.
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not guard.token_required:
            yield
            return
        await _threaded(guard.reload, store)

        async def refresh() -> None:  # a revoked token stops working within REFRESH seconds
            while True:
                await asyncio.sleep(REFRESH)
                with contextlib.suppress(StoreError):
                    await _threaded(guard.reload, store)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()

    app = Starlette(
        routes=[
            Route("/", overview_page),
            Route("/api/overview", overview_page),
            Route("/sessions", sessions_page),
            Route("/api/sessions", sessions_page),
            Route("/sessions/{session_id:path}", session_page),
            Route("/api/sessions/{session_id:path}", session_page),
            Route("/media/{sha256}", media_page),
            Route("/rows", rows_page),
            Route("/api/rows", rows_page),
            Route("/export", export_page),
            Route("/api/export", export_page),
            Route("/export.zip", export_zip),
            Route("/curate-selection", curate_selection_form, methods=["POST"]),
            Route("/api/feedback-selection", curate_selection_api, methods=["POST"]),
            Route("/calls/{call_id:path}", call_page),
            Route("/api/calls/{call_id:path}", call_page),
            Route("/curate", curate_form, methods=["POST"]),
            Route("/api/feedback", curate_api, methods=["POST"]),
            Route("/api/csrf", csrf_api),
            Route("/login", login, methods=["GET", "POST"]),
            Mount("/static", StaticFiles(packages=[("lithify.ui", "static")]), name="static"),
        ],
        lifespan=lifespan,
        exception_handlers={StoreError: _store_error},
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=middleware(guard, lambda: store))],
    )
    app.router.redirect_slashes = False  # a redirect would be built from the Host header
    app.state.guard = guard
    return app


async def _store_error(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"store error: {exc}"}, 503)


async def _threaded(fn: Any, *args: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


def _action(action: str, value: str) -> tuple[str, FeedbackValue]:
    """A form's curation button as a feedback name and value (docs/ui.md, Curate)."""
    if action in ("good", "bad"):
        return listing.LABEL, action
    if action == "exclude":
        return listing.EXCLUDE, True
    if action == "score":
        try:
            score = float(value)
        except ValueError:
            raise ValueError(f"a score is a number, not {value!r}") from None
        if not math.isfinite(score):
            raise ValueError("a score is a finite number")
        return listing.SCORE, int(score) if score.is_integer() else score
    if action == "comment":
        if not value.strip():
            raise ValueError("a comment holds some text")
        return listing.COMMENT, value.strip()
    raise ValueError(f"unknown action {action!r}: good, bad, exclude, score or comment")
