"""What a run comes to, in the lines ``nczarr-conformance report`` ends with: never a silent skip.

A cell is skipped for a *missing tool* when its writer or its reader is not available (the peer's
``available()`` names what is missing: ``gdalmdiminfo not installed``); every other skip is a case that
does not apply (a capability not declared, a case the writer cannot express, the corpus's own stores).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nczarr_conformance.conformance.matrix import MatrixRun
from nczarr_conformance.conformance.render import sided
from nczarr_conformance.conformance.rules import Result

#: how many outside-implementation findings the closing lines show (the rest are in the reports)
MAX_FINDINGS = 40


@dataclass
class Summary:
    cells: int = 0
    passed: int = 0
    deviate: int = 0
    fail: int = 0
    known: int = 0
    skipped: int = 0
    #: what is missing (an implementation's unavailability reason) → the implementations it takes out
    missing: dict[str, list[str]] = field(default_factory=dict)
    skipped_missing: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    rules_missing: int = 0
    findings: list[str] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.passed + self.deviate + self.fail + self.known

    def line(self) -> str:
        """The one summary line."""
        tools = "; ".join(f"{reason}: {', '.join(ids)}" for reason, ids in self.missing.items())
        missing = f"{self.skipped_missing} for a missing tool ({tools})" if self.skipped_missing else \
            "0 for a missing tool"
        return (f"{self.cells} cells, {self.ran} run: {self.passed} passed, {self.deviate} deviate, {self.fail} fail, "
                f"{self.known} known peer faults; {self.skipped} skipped: {missing}, "
                f"{self.skipped - self.skipped_missing} not applicable")

    def rules_line(self) -> str:
        r = self.rules
        total = sum(r.values())
        missing = f" ({self.rules_missing} for a missing tool)" if self.rules_missing else ""
        return (f"{total} rule results: {r['follows']} follow, {r['deviates']} deviate, "
                f"{r['not-applicable']} not applicable, {r['skipped']} skipped{missing}")


def _outside(info: dict[str, Any]) -> bool:
    """Added from outside this package (a command adapter, a config file, an entry point)."""
    return not str(info.get("source", "")).startswith("nczarr_conformance.")


def summarize(run: MatrixRun, results: list[Result], known: dict[tuple[str, str, str], str]) -> Summary:
    """The counts of a run (``known``: gate.known_faults of it) and the findings about implementations
    added from outside, each with its first difference worded by its side."""
    impls = {i["id"]: i for i in run.implementations}
    absent = {i["id"]: i["reason"] for i in run.implementations if not i["available"]}
    out = Summary(cells=len(run.cells))
    for reason in dict.fromkeys(absent.values()):
        out.missing[reason] = [pid for pid, why in absent.items() if why == reason]
    outside = {pid for pid, info in impls.items() if _outside(info)}
    for cell in run.cells:
        key = (cell.case, cell.writer, cell.reader)
        if cell.status == "skipped":
            out.skipped += 1
            out.skipped_missing += cell.writer in absent or cell.reader in absent
        elif cell.status == "pass":
            out.passed += 1
        elif key in known:
            out.known += 1
        elif cell.status == "deviates":
            out.deviate += 1
        else:
            out.fail += 1
        if cell.status in ("deviates", "fails") and {cell.writer, cell.reader} & outside and key not in known:
            first = sided(cell.differences[0]) if cell.differences else cell.message
            more = f" (+{len(cell.differences) - 1} more)" if len(cell.differences) > 1 else ""
            out.findings.append(f"{cell.status}: {cell.case}: {cell.writer} → {cell.reader}: {first}{more}")
    for result in results:
        out.rules[result.status] += 1
        out.rules_missing += result.status == "skipped" and result.implementation in absent
        if result.status == "deviates" and result.implementation in outside:
            out.findings.append(f"deviates: rule {result.rule}: {result.implementation}: {result.evidence}")
    return out
