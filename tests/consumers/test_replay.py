"""Every export the consumer tests make replays byte for byte from its manifest
(`lithify export --replay`, docs/export.md, Replay), through the same `lithify` command."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.consumers.pipeline import EXPORTS, LITHIFY, Consumers, clean_env

pytestmark = pytest.mark.consumers


@pytest.mark.parametrize("key", list(EXPORTS))
def test_every_consumer_export_replays_byte_for_byte(consumers: Consumers, key: str) -> None:
    manifest = consumers.folder(key) / "manifest.json"
    proc = subprocess.run(
        [str(LITHIFY), "export", "--replay", str(manifest), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=clean_env(),
        cwd=consumers.root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    folder = consumers.folder(key)
    # Five files, and the image files of TRL vision rows (images/NAME), each compared.
    written = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert result["identical"] and len(result["files"]) == len(written) >= 5
    assert {c["name"] for c in result["files"]} == written
