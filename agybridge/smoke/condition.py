"""``skip_if``: a small condition over a cell's axis values.

Grammar (``and`` binds tighter than ``or``; values are bare words or quoted)::

    condition := clause ("or" clause)*
    clause    := test ("and" test)*
    test      := AXIS ("==" | "!=") VALUE  |  AXIS ["not"] "in" "[" VALUE ("," VALUE)* "]"

e.g. ``mode == "safe" and model != default`` or ``effort in [high, max]``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

import attrs

_TOKEN = re.compile(r"""\s*(==|!=|\[|\]|,|"[^"]*"|'[^']*'|[^\s=!\[\],"']+)""")


class ConditionError(ValueError):
    """The condition does not parse or names an axis the matrix does not have."""


@attrs.frozen
class Test:
    axis: str
    values: tuple[str, ...]
    negated: bool

    def holds(self, axes: Mapping[str, str]) -> bool:
        return (axes.get(self.axis) in self.values) != self.negated


@attrs.frozen
class Condition:
    """Disjunction of conjunctions of axis tests."""

    text: str
    clauses: tuple[tuple[Test, ...], ...]

    def holds(self, axes: Mapping[str, str]) -> bool:
        return any(all(test.holds(axes) for test in clause) for clause in self.clauses)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConditionError(f"cannot read {text[position:].strip()!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _value(token: str) -> str:
    if token[:1] in "\"'":
        return token[1:-1]
    if token in ("==", "!=", "[", "]", ",", "and", "or", "in", "not"):
        raise ConditionError(f"expected a value, found {token!r}")
    return token


def parse_condition(text: str, axes: Collection[str]) -> Condition:
    """Parse ``text``; every axis it names must be one of ``axes``."""
    tokens = _tokens(text)
    if not tokens:
        raise ConditionError("the condition is empty")
    clauses: list[tuple[Test, ...]] = []
    tests: list[Test] = []
    index = 0

    def take() -> str:
        nonlocal index
        if index >= len(tokens):
            raise ConditionError("the condition ends too early")
        index += 1
        return tokens[index - 1]

    while True:
        axis = take()
        if axis not in axes:
            known = ", ".join(sorted(axes)) or "none"
            raise ConditionError(f"{axis!r} is not an axis of this matrix (axes: {known})")
        operator = take()
        if operator in ("==", "!="):
            tests.append(Test(axis, (_value(take()),), operator == "!="))
        else:
            negated = operator == "not"
            if negated:
                operator = take()
            if operator != "in" or take() != "[":
                raise ConditionError(f"expected ==, !=, in or not in after {axis!r}")
            values = [_value(take())]
            while (separator := take()) == ",":
                values.append(_value(take()))
            if separator != "]":
                raise ConditionError(f"expected , or ] in the list, found {separator!r}")
            tests.append(Test(axis, tuple(values), negated))
        if index == len(tokens):
            break
        joiner = take()
        if joiner == "or":
            clauses.append(tuple(tests))
            tests = []
        elif joiner != "and":
            raise ConditionError(f"expected 'and' or 'or', found {joiner!r}")
    clauses.append(tuple(tests))
    return Condition(text, tuple(clauses))
