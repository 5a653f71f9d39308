"""A local fake Gemini API for the Gemini-side producers: ``tests/fakes`` (the project's fake
provider, stdlib only) scripted with the weather-agent tool loop.

``:generateContent`` and ``:streamGenerateContent?alt=sse`` under ``/v1beta/models/{model}``, in
the Gemini API's own wire format (``tests/fakes/wire.py``: candidates, ``usageMetadata``,
``modelVersion``, ``responseId``; streamed as ``data:`` frames). The conversation is the one
``fake_openai.py`` plays: a request whose last turn holds no function response gets a thinking
answer (a ``thought: true`` text part, then two ``functionCall`` parts, the first signed with a
``thoughtSignature``, as thinking models send them; no call ids, as the Gemini API sends none);
a request that ends with the function responses gets the final text. Answers are chosen from the
request, not from a queue, so a client that retries or calls once more gets a fitting answer.

Each exchange is recorded as ``{"path", "stream", "request", "response", "answer"}``: ``request``
and ``response`` as sent (JSON, or the SSE text), ``answer`` the logical reply (``id``, ``model``,
``reasoning``, ``text``, ``calls`` with ``args`` objects, ``finish_reason`` as on the wire,
``usage``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the producer venvs do not install lithify's tests
    sys.path.insert(0, str(ROOT))

from tests.fakes import wire  # noqa: E402
from tests.fakes.answers import Answer, Call, answer  # noqa: E402
from tests.fakes.provider import FakeProvider  # noqa: E402

# The same conversation as fake_openai.py (and common.py), in Gemini's terms.
CALLS = (
    Call.of("get_weather", {"city": "Paris", "unit": "celsius"}),
    Call.of("get_weather", {"city": "Zürich", "unit": "celsius"}),
)
FINAL_TEXT = "Paris: 18 °C and cloudy. Zürich: 12 °C with light rain — take an umbrella."
MODEL = "gemini-2.5-flash"  # requested and answered (the Gemini API echoes the model name)
REASONING = "Two cities, one get_weather call each; both can run at once."


def _ends_with_results(request: dict[str, Any]) -> bool:
    contents = request.get("contents") or []
    last = contents[-1] if contents else {}
    return any("functionResponse" in p for p in last.get("parts") or [])


def _tokens(request: dict[str, Any]) -> int:
    return max(1, len(json.dumps(request.get("contents", []), ensure_ascii=False)) // 4)


class FakeGemini(FakeProvider):
    """``tests.fakes.FakeProvider`` whose next answer follows the request it answers."""

    def __init__(self, id_prefix: str = "fake") -> None:
        super().__init__(id_prefix)

    @property
    def base_url(self) -> str:
        return self.url

    def _next(self) -> tuple[Answer | None, str]:  # type: ignore[override]
        # The handler records the exchange before it asks for a step; the clients here call
        # one at a time, so the latest exchange is the request being answered.
        _, key = super()._next()
        try:
            request = self.exchanges[-1].request_json
        except (IndexError, ValueError):
            return None, key
        return self.pick(request if isinstance(request, dict) else {}), key

    def pick(self, request: dict[str, Any]) -> Answer:
        if _ends_with_results(request):
            return answer(FINAL_TEXT, input_tokens=_tokens(request), output_tokens=23, model=MODEL)
        return answer(
            reasoning=[REASONING],
            calls=CALLS,
            input_tokens=_tokens(request),
            output_tokens=41 + 12,
            reasoning_tokens=12,
            model=MODEL,
        )

    def records(self) -> list[dict[str, Any]]:
        """Every exchange as recorded, with the logical answer."""
        out = []
        for ex in self.exchanges:
            step = ex.step
            assert isinstance(step, Answer), ex.path
            ch = step.choice
            out.append(
                {
                    "path": ex.path,
                    "stream": ex.stream,
                    "request": ex.request_json,
                    "response": ex.response,
                    "answer": {
                        "id": ex.key,
                        "model": step.model,
                        "reasoning": "".join(ch.reasoning),
                        "text": ch.text,
                        "calls": [{"name": c.name, "args": c.args} for c in ch.calls],
                        "finish_reason": wire._gemini_finish(ch),
                        "usage": {
                            "input_tokens": step.input_tokens,
                            "output_tokens": step.output_tokens,
                        },
                    },
                }
            )
        return out

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.records(), indent=2, ensure_ascii=False) + "\n", "utf-8")
