"""nczarr-check: run every registered rule over a store and collect findings."""
from __future__ import annotations

import time
from collections.abc import Iterator

from ..stores import open_store
from ..urls import parse
from . import attrs, chunks, interop, layout, metadata  # noqa: F401  (registers the rules)
from .context import CheckContext
from .report import Report
from .rules import RULES, Finding, Severity, get, rule

__all__ = ["check", "RULES", "Report", "Finding", "Severity"]

FLAVOR_CHOICES = ("nczarr-v1", "nczarr-2-upper", "nczarr-2", "nczarr-4.10", "zarr")


@rule("NCZ-LAYOUT-FLAVOR", Severity.ERROR)
def expected_flavor(ctx: CheckContext) -> Iterator[Finding]:
    """The detected flavor is the one --expect names."""
    expected = ctx.__dict__.get("expect")
    if expected and ctx.flavor != expected:
        yield get("NCZ-LAYOUT-FLAVOR").finding(None, f"flavor {ctx.flavor}, expected {expected}")


@rule("NCZ-CHECK-CRASH", Severity.ERROR)
def crashed(ctx: CheckContext) -> Iterator[Finding]:
    """A rule raised instead of reporting: a bug in nczarr-check, reported so the run still completes."""
    return iter(())


def check(url: str, *, deep: bool = False, expect: str | None = None) -> Report:
    """Check the dataset at ``url``; raises only when the store cannot be opened (exit 2)."""
    started = time.perf_counter()
    spec = parse(url)
    with open_store(spec) as store:
        ctx = CheckContext(store, url, deep=deep)
        ctx.__dict__["expect"] = expect
        findings: list[Finding] = []
        order = ["NCZ-LAYOUT-NODATASET"] if ctx.flavor == "unknown" else list(RULES)
        for rule_id in order:
            r = RULES[rule_id]
            if r.deep and not deep:
                continue
            try:
                findings.extend(r.function(ctx))
            except Exception as exc:  # a rule's exception is a finding, never a crash
                findings.append(get("NCZ-CHECK-CRASH").finding(None, f"{rule_id} raised {type(exc).__name__}: {exc}"))
        if expect and ctx.flavor == "unknown":
            findings.extend(expected_flavor(ctx))
        return Report(url, ctx.flavor, findings, ctx.objects_read, time.perf_counter() - started)
