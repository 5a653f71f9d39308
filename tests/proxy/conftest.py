"""Fixtures: the fake provider, and a real `lithify proxy` in front of it on a fresh store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.fakes import FakeProvider
from tests.fakes.provider import Exchange
from tests.proxy.helpers import ProxyProcess, start_proxy


class Via:
    """The fake as an SDK pointed at the proxy sees it: the SDK's base URL is the proxy's, the
    script and the records are the fake's (so the test drivers of tests/test_provider_sdks.py
    run unchanged through the proxy)."""

    def __init__(self, fake: FakeProvider, proxy_url: str) -> None:
        self.fake = fake
        self.url = proxy_url

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, *steps: Any) -> Via:
        self.fake.script(*steps)
        return self

    def reset(self) -> None:
        self.fake.reset()

    def wait(self, n: int, timeout: float = 5.0) -> list[Exchange]:
        return self.fake.wait(n, timeout)


def through(fake: FakeProvider | None, proxy_url: str) -> FakeProvider:
    """``Via`` typed as what the test drivers take."""
    return cast(FakeProvider, Via(cast(FakeProvider, fake), proxy_url))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def upstreams_of(fake: FakeProvider) -> dict[str, str]:
    return {"openai": fake.url, "anthropic": fake.url, "gemini": fake.url}


@pytest.fixture(scope="module")
def proxy(fake: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    tmp: Path = tmp_path_factory.mktemp("proxy")
    p = start_proxy(tmp, upstreams_of(fake))
    yield p
    assert p.stop() == 0


@pytest.fixture
def via(fake: FakeProvider, proxy: ProxyProcess) -> FakeProvider:
    return through(fake, proxy.url)
