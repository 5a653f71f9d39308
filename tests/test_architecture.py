"""The house rules of src/ (docs/architecture.md), checked on every import statement: stages
import only downward, and no module imports another package's private module."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "lithify"

# What each part of the package may import from lithify: the flow runs down this table.
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "schemas": set(),
    "core": {"model"},
    "translate": {"model", "core"},
    "store": {"model", "core"},
    "derive": {"model", "core"},
    "export": {"model", "core", "derive", "store", "schemas"},
    "ingest": {"model", "core", "translate", "store"},
    "examples": set(),
}
FACES = {
    "cli",
    "ui",
    "__init__",
    "__main__",
}  # the faces (command line, web viewer) may import any stage

# Imports against the flow that stand for now, each with why; an entry goes when its edge does.
# (None today: the servers raise ServerFailed and the faces choose the exit code.)
KNOWN: dict[tuple[str, str], str] = {}


def _part(module: str) -> str:
    """``lithify.store._sql`` → ``store``; a module of the faces → its face."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@functools.cache
def _imports() -> list[tuple[str, str, int]]:
    """(importing module, imported module, line) for every lithify import in src/, parsed in a
    fresh interpreter: CPython 3.11's ``ast.parse`` fails ("AST constructor recursion depth
    mismatch") while another thread of the same process builds AST objects, and a pytest-xdist
    process may still hold an earlier test's threads (Ray's, a server's)."""
    code = "import json, tests.test_architecture as t; print(json.dumps(t._parsed()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=SRC.parent.parent, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [(a, b, line) for a, b, line in json.loads(done.stdout)]


def _parsed() -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                # `from lithify.store import _sql` imports a module, not a name
                out += [(module, n, node.lineno) for n in names if n.startswith("lithify")]
            elif isinstance(node, ast.Import):
                out += [
                    (module, a.name, node.lineno)
                    for a in node.names
                    if a.name.startswith("lithify")
                ]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
                out.append((module, "__import__", node.lineno))  # hides imports from tools
    return out


def _is_module(name: str) -> bool:
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_stages_import_only_downward() -> None:
    wrong = []
    for importer, imported, line in _imports():
        if imported == "__import__":
            wrong.append(f"{importer}:{line} calls __import__")
            continue
        if not _is_module(imported):
            continue  # a name imported from a module: the module's own entry covers it
        src, dst = _part(importer), _part(imported)
        if src == dst or src in FACES or src not in ALLOWED:
            continue
        if dst not in ALLOWED[src] and (importer, imported) not in KNOWN:
            wrong.append(f"{importer}:{line} imports {imported} ({src} → {dst})")
    assert wrong == []


def test_every_known_exception_still_stands() -> None:
    """An edge in KNOWN that is gone leaves the table, so that it cannot come back unseen."""
    edges = {(importer, imported) for importer, imported, _ in _imports()}
    assert sorted(KNOWN.keys() - edges) == []


def test_no_package_imports_another_packages_private_module() -> None:
    wrong = []
    for importer, imported, line in _imports():
        if imported == "__import__" or not _is_module(imported):
            continue
        parts = imported.split(".")
        at = next((i for i, p in enumerate(parts) if p.startswith("_")), None)
        if at is None:
            continue
        owner = ".".join(parts[:at])  # the package the private module belongs to
        if importer != owner and not importer.startswith(owner + "."):
            wrong.append(f"{importer}:{line} imports the private {imported}")
    assert wrong == []


def test_every_part_of_the_package_is_placed() -> None:
    """A new top-level module or package must be given its place in the flow above."""
    parts = {p.stem if p.is_file() else p.name for p in SRC.iterdir() if not p.name.startswith(".")}
    parts -= {"__pycache__", "py"}
    unplaced = sorted(p for p in parts if p not in ALLOWED and p not in FACES and p != "py.typed")
    assert unplaced == []
