"""Rule, Severity, Finding and the rule registry (one function per rule id).

A rule is ``@rule("NCZ-AREA-WHAT", Severity.ERROR)`` on a function taking a
:class:`~nczarr_conformance.checker.context.CheckContext` and yielding findings; the
first line of its docstring is the documented description (docs/rules.md).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from nczarr_conformance.errors import DuplicateIdError

if TYPE_CHECKING:
    from nczarr_conformance.checker.context import CheckContext


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
    fix: str | None = None  # the nczarr-fix fix that cures it (NCZ-FIX-…), when one does

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"rule": self.rule, "severity": str(self.severity), "key": self.key,
                                  "message": self.message}
        if self.fix is not None:
            doc["fix"] = self.fix
        return doc


RuleFunction = Callable[["CheckContext"], Iterator[Finding]]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: Severity
    function: RuleFunction
    source: str
    deep: bool = False
    final: bool = False  # reports what the context recorded while the other rules read: runs after them

    @property
    def description(self) -> str:
        return (self.function.__doc__ or "").strip().splitlines()[0]

    def matches(self, patterns: list[str]) -> bool:
        """True when a pattern is this id or a prefix of it at a '-' boundary (NCZ-INTEROP-C490)."""
        return any(self.id == p or self.id.startswith(p.rstrip("-") + "-") for p in patterns)

    def finding(self, key: str | None, message: str, severity: Severity | None = None) -> Finding:
        return Finding(self.id, severity or self.severity, key, message)


RULES: dict[str, Rule] = {}
#: rule id → where it was registered (its module, or the entry point that loaded it): a clash names both
ORIGINS: dict[str, str] = {}
#: the entry point being loaded (checker/plugins.py), innermost last: what a rule registered now came from
LOADING: list[str] = []


def rule(rule_id: str, severity: Severity, *, source: str, deep: bool = False,
         final: bool = False) -> Callable[[RuleFunction], RuleFunction]:
    """Register a rule function under a stable id; a duplicate id is a programming error.

    ``source`` names what the rule stands on (a spec section, a peer's behaviour), so
    ``--list-rules`` and docs/rules.md can say why a finding is one.
    """

    def register(function: RuleFunction) -> RuleFunction:
        origin = LOADING[-1] if LOADING else f"module {function.__module__}"
        if rule_id in RULES:
            raise DuplicateIdError(f"rule id {rule_id} registered twice: first by {ORIGINS[rule_id]}, "
                                   f"again by {origin}")
        if not (function.__doc__ or "").strip():
            raise ValueError(f"rule {rule_id} needs a docstring: its first line is the documentation")
        if not source.strip():
            raise ValueError(f"rule {rule_id} needs a source: what it stands on")
        RULES[rule_id] = Rule(rule_id, severity, function, source, deep, final)
        ORIGINS[rule_id] = origin
        return function

    return register


def matching(patterns: list[str]) -> list[str]:
    """Ids of the rules ``patterns`` (ids or prefixes) name; a pattern naming none is a usage error."""
    from nczarr_conformance.errors import UsageError

    for p in patterns:
        if not any(r.matches([p]) for r in RULES.values()):
            raise UsageError(f"no rule matches {p!r} (see --list-rules)")
    return [rid for rid, r in RULES.items() if r.matches(patterns)]


def get(rule_id: str) -> Rule:
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown rule {rule_id}; known: {', '.join(sorted(RULES))}") from None
