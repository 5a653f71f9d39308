"""Who may use the viewer and how: loopback without a token, any other address with a store
ingest token (the mechanism of ``lithify serve``: ``TokenCache``); a CSRF token on every
state-changing request; the Host header checked on loopback (DNS rebinding); headers that
keep any content a page shows inert (docs/ui.md, Security)."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from lithify.ingest.tokens import TokenCache
from lithify.store import FactStore

COOKIE = "lithify_ui_token"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# Nothing but the package's own script and styles runs or loads: text that escaped escaping
# still could not run, load, frame or post anywhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make forms send Origin: null
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
_SAFE = {"GET", "HEAD", "OPTIONS"}
_OPEN_PATHS = ("/static/", "/login")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Guard:
    """The viewer's access rules for one server."""

    loopback: bool  # bound to a loopback address: no token, Host checked
    tokens: TokenCache = field(default_factory=lambda: TokenCache(require=True))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def token_required(self) -> bool:
        return not self.loopback

    def reload(self, store: FactStore) -> None:
        self.tokens.load(store.token_hashes())

    def user(self, request: Request, store: FactStore) -> str | None:
        """The token name the request carries (header or cookie), when it is live; a token
        created since the last reload is looked for at most once a second."""
        header = request.headers.get("authorization")
        cookie = request.cookies.get(COOKIE)
        carried = header or (f"Bearer {cookie}" if cookie else None)
        name = self.tokens.check(carried)
        if name is None and carried and time.monotonic() - self.tokens.loaded_at > 1.0:
            self.reload(store)
            name = self.tokens.check(carried)
        return name

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

    def host_ok(self, request: Request) -> bool:
        """On loopback, only loopback names: a page elsewhere whose name was re-pointed at
        127.0.0.1 (DNS rebinding) then cannot read the viewer."""
        if not self.loopback:
            return True
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return is_loopback(name)

    def cross_site(self, request: Request) -> bool:
        """A request a browser says comes from another site (Fetch metadata), or whose Origin is
        not this server's."""
        if request.headers.get("sec-fetch-site") == "cross-site":
            return True
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return False  # not told (a sandboxed frame says null): the CSRF token decides
        return origin.split("://", 1)[-1] != request.headers.get("host", "")


MAX_FORM = 64 * 1024  # a label, a score or a comment: far less


class FormTooLarge(ValueError):
    pass


async def read_form(request: Request) -> dict[str, str]:
    """An URL-encoded form's fields (the last value of each); empty for another content type.
    The body is read once and kept by the request, so the endpoint reads it again for free."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    size = request.headers.get("content-length")
    if size is not None and (not size.isdigit() or int(size) > MAX_FORM):
        raise FormTooLarge(f"a form is at most {MAX_FORM} bytes")
    body = await request.body()
    if len(body) > MAX_FORM:
        raise FormTooLarge(f"a form is at most {MAX_FORM} bytes")
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def _api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def middleware(guard: Guard, store: Callable[[], FactStore]) -> Any:
    """A ``BaseHTTPMiddleware`` dispatch enforcing ``guard`` and adding the security headers
    to every answer."""

    async def check(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await _checked(request, call_next)
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    async def _checked(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if not guard.host_ok(request):
            return PlainTextResponse("this viewer answers only to a loopback host name", 421)
        path = request.url.path
        request.state.user = None
        if guard.token_required and not path.startswith(_OPEN_PATHS):
            user = guard.user(request, store())
            if user is None:
                if _api(request):
                    return JSONResponse(
                        {"error": "a valid token is required: Authorization: Bearer <token>"},
                        401,
                        headers={"www-authenticate": "Bearer"},
                    )
                return RedirectResponse("/login", 303)
            request.state.user = user
        if request.method not in _SAFE:
            size = request.headers.get("content-length")
            if size is None or not size.isdigit() or int(size) > MAX_FORM:
                # Labels are small: a body of unknown or large size is not read at all.
                return PlainTextResponse(f"a request body is at most {MAX_FORM} bytes", 413)
            bearer = guard.token_required and request.headers.get("authorization")
            # A browser sends the cookie by itself, never an Authorization header: a request
            # with one was made by a script that holds the token, not forged by a page.
            if not bearer:
                if guard.cross_site(request):
                    return _refuse(request, "a request from another site")
                given = request.headers.get(CSRF_HEADER)
                if given is None:
                    given = (await read_form(request)).get(CSRF_FIELD)
                if not guard.csrf_ok(given):
                    return _refuse(request, "a missing or wrong CSRF token")
        return await call_next(request)

    return check


def _refuse(request: Request, why: str) -> Response:
    message = f"refused: {why} (state-changing requests carry the page's CSRF token)"
    if _api(request):
        return JSONResponse({"error": message}, 403)
    return PlainTextResponse(message, 403)
