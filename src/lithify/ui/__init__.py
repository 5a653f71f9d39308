"""``lithify ui``: a web viewer over the fact store, to read sessions and curate them before
training (docs/ui.md). A face, like the command line: it reads through the store API and
derivation's own functions, and writes nothing but feedback facts."""

from __future__ import annotations

from lithify.ui.app import UiConfig, build_app
from lithify.ui.server import serve

__all__ = ["UiConfig", "build_app", "serve"]
