"""`lithify ui` run from TRL's venv renders a session's SFT rows through the chat templates TRL
ships, as TRL renders them: for each template and profile tried, the Rows page's text is exactly
what TRL's ``apply_chat_template`` (and transformers' under it) gives for the same row, a
template's refusal is shown as that refusal, and hostile text stays text in a real browser.

The TRL venv (scripts/consumers-setup) holds TRL and transformers but not lithify: the viewer
runs on that venv's interpreter and packages, with lithify and those of its dependencies the venv
lacks taken from lithify's own venv, after TRL's (``site.addsitedir``), so that TRL, transformers
and jinja2 are the TRL venv's own.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

import lithify
from lithify.store import open_store
from tests.consumers.pipeline import clean_env, consumer_python
from tests.export.helpers import assistant, call, fact, text, tool, user
from tests.http_client import request
from tests.ui.conftest import (  # noqa: F401  (browser: the fixture)
    HOSTILE_SESSION,
    IMG,
    SCRIPT,
    Running,
    browser,
    open_tab,
    sample_facts,
)

pytestmark = pytest.mark.consumers

TEMPLATES = ("qwen3", "llama3_1", "gptoss", "deepseekv3", "glm4moe")
PROFILES = ("trl", "openai", "axolotl", "canonical")
SESSIONS = ("agent-1", "chat-2", "parallel", HOSTILE_SESSION)
LLAMA_PARALLEL = "This model only supports single tool-calls at once!"

LAUNCH = """
import site, sys
site.addsitedir(sys.argv[1])  # what the TRL venv lacks, after the venv's own
sys.path.insert(0, sys.argv[2])  # the lithify this test imports
from lithify.cli import main
sys.argv = ["lithify", "ui", "--store", sys.argv[3], "--port", "0"]
main()
"""

# TRL's own rendering of a row, as SFTTrainer does for a `messages` row, and transformers'
# apply_chat_template directly; the tokenizer has no special tokens, as the viewer's.
REFERENCE = """
import json, sys
from pathlib import Path
import trl
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast
from trl.data_utils import apply_chat_template

tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
folder = Path(trl.__file__).parent / "chat_templates"
out = []
for template, row in json.load(sys.stdin):
    tok.chat_template = (folder / f"{template}.jinja").read_text(encoding="utf-8")
    try:
        trl_text = apply_chat_template({"messages": row["messages"]}, tok, tools=row["tools"])
        direct = tok.apply_chat_template(row["messages"], tools=row["tools"] or None,
                                         tokenize=False)
        out.append({"text": trl_text["text"], "direct": direct})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
json.dump(out, sys.stdout)
"""


LITHIFY_SRC = str(Path(lithify.__file__).resolve().parents[1])


def _main_site() -> str:
    return sysconfig.get_paths()["purelib"]


@pytest.fixture(scope="module")
def trl_viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    if not consumer_python("trl").exists():
        pytest.fail("no TRL venv: run bash scripts/consumers-setup trl", pytrace=False)
    folder = tmp_path_factory.mktemp("ui-templates")
    url = f"sqlite://{folder / 'store.db'}"
    parallel = fact(
        "parallel-a",
        [user("Weather in Oslo and Rome?")],
        [assistant(call("p1", city="Oslo"), call("p2", city="Rome"), finish="tool_call")],
        session="parallel",
        second=50,
    )
    answered = fact(
        "parallel-b",
        [
            user("Weather in Oslo and Rome?"),
            parallel.output_messages[0],
            tool("p1", "rain"),
            tool("p2", "sun"),
        ],
        [assistant(text("Rain in Oslo, sun in Rome."))],
        session="parallel",
        second=51,
    )
    with open_store(url) as store:
        store.insert_facts([*sample_facts(), parallel, answered])
    proc = subprocess.Popen(
        [str(consumer_python("trl")), "-c", LAUNCH, _main_site(), LITHIFY_SRC, url],
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.match(r"lithify ui on http://127\.0\.0\.1:(\d+)/ ", line)
        assert m, line
        port = int(m.group(1))
        yield Running(f"http://127.0.0.1:{port}", port, None, None)  # type: ignore[arg-type]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def _rows(v: Running, session: str, profile: str, template: str | None) -> dict[str, Any]:
    query = {"session": session, "kind": "sft", "profile": profile}
    if template:
        query["template"] = template
    reply = request(v.port, "GET", "/api/rows?" + urlencode(query), timeout=120)
    assert reply.status == 200, reply.body[:500]
    return reply.json()  # type: ignore[no-any-return]


def _reference(pairs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, str]]:
    done = subprocess.run(
        [str(consumer_python("trl")), "-c", REFERENCE],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_rows_render_as_trl_renders_them(trl_viewer: Running) -> None:
    listed = _rows(trl_viewer, "agent-1", "trl", None)["chat_template"]
    assert set(TEMPLATES) <= set(listed["templates"]) and listed["note"] is None
    assert "qwen3_training" in listed["templates"]  # every template TRL ships
    pages, pairs = [], []
    for template in TEMPLATES:
        for profile in PROFILES:
            for session in SESSIONS:
                page = _rows(trl_viewer, session, profile, template)
                assert page["chat_template"]["template"] == template
                assert page["rows"], (session, profile)
                for r in page["rows"]:
                    pages.append(r["rendered"])
                    pairs.append((template, r["row"]))
    expected = _reference(pairs)
    for (template, row), got, want in zip(pairs, pages, expected, strict=True):
        if "error" in want:
            assert got == {"error": want["error"]}, (template, row["metadata"])
        else:
            assert want["text"] == want["direct"]
            assert got == {"text": want["text"]}, (template, row["metadata"])
    assert sum("text" in p for p in pages) > len(pages) // 2  # most rows render
    # Llama 3.1's own refusal of parallel tool calls, as TRL meets it
    refusals = [p["error"] for p in pages if "error" in p]
    assert any(LLAMA_PARALLEL in e for e in refusals)
    # the hostile session's script is in the rendered text, as text
    hostile = _rows(trl_viewer, HOSTILE_SESSION, "trl", "qwen3")["rows"]
    assert any(SCRIPT in r["rendered"]["text"] for r in hostile)


def test_other_kinds_and_bad_names(trl_viewer: Running) -> None:
    dpo = request(trl_viewer.port, "GET", "/api/rows?session=agent-1&kind=dpo&template=qwen3")
    assert dpo.status == 200
    assert dpo.json()["chat_template"] == {"templates": [], "template": None, "note": None}
    assert all("rendered" not in r for r in dpo.json()["rows"])
    bad = request(trl_viewer.port, "GET", "/api/rows?session=agent-1&template=..%2Fqwen3")
    assert bad.status == 400 and "TRL's chat templates" in bad.json()["error"]


def test_the_rendering_stays_text_in_a_browser(browser: Any, trl_viewer: Running) -> None:  # noqa: F811
    sid = quote(HOSTILE_SESSION, safe="")
    with open_tab(browser, trl_viewer) as tab:
        page = tab.page
        tab.go(f"/rows?session={sid}&kind=sft&profile=trl")
        page.select_option("select[name=template]", "qwen3")
        tab.follow(page.get_by_role("button", name="Render"))
        assert "template=qwen3" in page.url
        rendered = page.locator(".rendered pre").first
        assert SCRIPT in rendered.inner_text() and IMG in rendered.inner_text()
        assert page.evaluate("window.__pwned") is None
        assert page.locator("script").count() == 1
        assert page.locator("img, svg, iframe").count() == 0
        assert page.locator("body > footer").is_visible()
        tab.go("/rows?session=agent-1&kind=sft&profile=trl&template=qwen3")
        assert "<think>" in page.locator(".rendered pre").first.inner_text()
        tab.shot("rows-template")
