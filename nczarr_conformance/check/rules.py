"""Rule, Severity, Finding and the rule registry (one function per rule id).

A rule is ``@rule("NCZ-AREA-WHAT", Severity.ERROR)`` on a function taking a
:class:`~nczarr_conformance.check.context.CheckContext` and yielding findings; the
first line of its docstring is the documented description (docs/rules.md).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import CheckContext


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    key: str | None
    message: str

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule, "severity": str(self.severity), "key": self.key, "message": self.message}


RuleFunction = Callable[["CheckContext"], Iterator[Finding]]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: Severity
    function: RuleFunction
    deep: bool = False

    @property
    def description(self) -> str:
        return (self.function.__doc__ or "").strip().splitlines()[0]

    def finding(self, key: str | None, message: str, severity: Severity | None = None) -> Finding:
        return Finding(self.id, severity or self.severity, key, message)


RULES: dict[str, Rule] = {}


def rule(rule_id: str, severity: Severity, *, deep: bool = False) -> Callable[[RuleFunction], RuleFunction]:
    """Register a rule function under a stable id; a duplicate id is a programming error."""

    def register(function: RuleFunction) -> RuleFunction:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id} registered twice")
        if not (function.__doc__ or "").strip():
            raise ValueError(f"rule {rule_id} needs a docstring: its first line is the documentation")
        RULES[rule_id] = Rule(rule_id, severity, function, deep)
        return function

    return register


def get(rule_id: str) -> Rule:
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown rule {rule_id}; known: {', '.join(sorted(RULES))}") from None
