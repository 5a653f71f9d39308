"""Feedback filters and rewards: ``--where 'score>=0.8'``.

The filter language is deliberately tiny and safe: ``NAME OP LITERAL``, nothing is evaluated.
NAME is a feedback name; OP one of ``>= <= > < == != =``; LITERAL a number, ``true``/``false``,
or a string (quoted, or a bare word) compared with ``==``/``!=`` only.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Value = bool | int | float | str

_EXPR = re.compile(
    r"^\s*(?P<name>[A-Za-z_][\w.:/-]*?)\s*(?P<op>>=|<=|==|!=|=|>|<)\s*(?P<lit>.*?)\s*$"
)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_OPS: dict[str, Callable[[object, object], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "=": operator.eq,
    "!=": operator.ne,
}


class WhereError(ValueError):
    """An expression the filter language does not accept."""


@dataclass(frozen=True)
class Condition:
    name: str
    op: str
    literal: Value

    def matches(self, values: dict[str, Value]) -> bool:
        """Whether the feedback ``values`` (name → value) satisfy the condition.

        A missing value never matches; types never mix (``true`` is not ``1``).
        """
        v = values.get(self.name)
        if v is None:
            return False
        lit = self.literal
        if isinstance(lit, bool) or isinstance(v, bool):
            if not (isinstance(lit, bool) and isinstance(v, bool)):
                return False
        elif isinstance(lit, float):
            if not isinstance(v, int | float):
                return False
        elif not isinstance(v, str):
            return False
        return _OPS[self.op](v, lit)

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.literal!r}"


def parse(text: str) -> Condition:
    m = _EXPR.match(text)
    if m is None:
        raise WhereError(f"{text!r}: expected NAME OP VALUE, e.g. 'score>=0.8'")
    name, op, lit = m.group("name"), m.group("op"), m.group("lit")
    if not lit:
        raise WhereError(f"{text!r}: a value is missing after {op}")
    literal: Value
    if lit in ("true", "false"):
        literal = lit == "true"
    elif _NUMBER.match(lit):
        literal = float(lit)
        if not math.isfinite(literal):
            raise WhereError(f"{text!r}: the number is out of range")
    elif len(lit) >= 2 and lit[0] == lit[-1] and lit[0] in "'\"":
        literal = lit[1:-1]
    elif re.fullmatch(r"[\w.:/-]+", lit):
        literal = lit
    else:
        raise WhereError(f"{text!r}: quote a string value, e.g. label=='good'")
    if isinstance(literal, str | bool) and op not in ("==", "=", "!="):
        raise WhereError(f"{text!r}: {op} compares numbers; strings and booleans take == or !=")
    return Condition(name, "==" if op == "=" else op, literal)


def matches_all(conditions: Iterable[Condition], values: dict[str, Value]) -> bool:
    return all(c.matches(values) for c in conditions)


def numeric(value: Value | None) -> float | None:
    """A reward from a feedback value: numbers as they are, booleans as 1/0, labels none."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None
