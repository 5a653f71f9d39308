"""Plain option values without pydantic: typer 0.29 checks every value through a pydantic
TypeAdapter, and the first one it checks imports pydantic, which cost `lithify convert` of a small
file a sixth of its start-up (docs/development.md, Start-up).

Here a text value of a ``str`` parameter stays as it is, a ``bool`` value of a flag too, and a
text value of a ``Path`` parameter becomes a ``Path`` before typer's own path checks
(``coerce_cli_path``, which then needs no pydantic): what the adapters give for them. Anything
else (numbers, a flag's text from the environment, a parameter with a parser) goes to typer's
coercion as before. This leans on typer's private
modules: if they change, ``plain_values`` leaves every parameter to typer, and
tests/test_startup.py, which checks that `lithify convert` does not import pydantic, says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
    from typer.core import _TyperParameter
except ImportError:  # another typer: its own coercion for everything
    RuntimeParam = None  # type: ignore[assignment,misc]


def _leaf(annotation: Any) -> type | None:
    """``str``, ``bool`` or ``Path`` for a parameter of that type (or a list of it), else None."""
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    return annotation if annotation in (str, bool, Path) else None


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Plain(RuntimeParam):
        descriptor: Any
        leaf: type

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            many = get_origin(self.annotation) is list
            items = (value if isinstance(value, list | tuple) else [value]) if many else [value]
            plain = bool if self.leaf is bool else str
            if any(type(v) is not plain for v in items):  # a default of another type, say
                return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)
            if self.leaf is Path:
                items = [
                    coerce_cli_path(
                        Path(v), self.parameter_info, path_type=Path, param=param, ctx=ctx
                    )
                    for v in items
                ]
            return list(items) if many else items[0]


def plain_values(command: Any) -> None:
    """Give the ``str``, ``bool`` and ``Path`` parameters of ``command`` (and of its subcommands)
    the coercion above."""
    for sub in getattr(command, "commands", {}).values():
        plain_values(sub)
    for param in command.params:
        plain_value(param)


def plain_value(param: Any) -> None:
    """The coercion above for ``param``, when it is a plain ``str``, ``bool`` or ``Path`` one."""
    if RuntimeParam is None:
        return
    if not isinstance(param, _TyperParameter) or param._runtime_param is not None:
        return
    descriptor = param.type_descriptor
    leaf = _leaf(descriptor.annotation)
    info = descriptor.parameter_info
    if leaf is None or info.parser is not None or descriptor.file_annotation is not None:
        return
    if leaf is Path and info.path_type is not None:
        return  # a str or bytes path type: typer's own
    param._runtime_param = _Plain(
        parameter_info=info, annotation=descriptor.annotation, descriptor=descriptor, leaf=leaf
    )
