"""nczarr-check: run every registered rule over a store and collect findings.

The rules registry, the tolerant read context and the rule families. May import ``fix`` (a finding
names the fix that cures it), ``nczarr``, ``stores`` and the ground floor.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from nczarr_conformance import reader_needs
from nczarr_conformance.checker import (  # noqa: F401  (registers the rules, then the SARIF and JUnit formats)
    attrs,
    chunks,
    draft,
    interop,
    junit,
    layout,
    metadata,
    nz,
    readers,
    references,
    sarif,
    v3,
    zarr3,
)
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.report import Report
from nczarr_conformance.checker.rules import (
    RULES,
    Finding,
    Severity,
    get,
    matching,
    rule,
)
from nczarr_conformance.errors import StoreUnavailableError
from nczarr_conformance.flavor_names import CHECK_FLAVORS
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.sniff import netcdf_file_error
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.metadata import FLAVOR as V3_FLAVOR
from nczarr_conformance.zarr3.reader import is_v3

__all__ = ["RULES", "Finding", "Report", "Severity", "check"]

FLAVOR_CHOICES = CHECK_FLAVORS


@rule("NCZ-LAYOUT-FLAVOR", Severity.ERROR, source="--expect")
def expected_flavor(ctx: CheckContext) -> Iterator[Finding]:
    """The detected flavor is the one --expect names."""
    expected = ctx.__dict__.get("expect")
    if expected:
        yield from _flavor_differs(ctx.flavor, expected)


def _flavor_differs(flavor: str, expected: str) -> Iterator[Finding]:
    """NCZ-LAYOUT-FLAVOR's finding when the reported flavor is not the expected one (a Zarr v3 store's
    is the layout found in it: ``zarr-v3``, ``nczarr-v3-draft`` or ``nz``)."""
    if flavor != expected:
        yield get("NCZ-LAYOUT-FLAVOR").finding(None, f"flavor {flavor}, expected {expected}")


@rule("NCZ-CHECK-CRASH", Severity.ERROR, source="nczarr-check")
def crashed(ctx: CheckContext) -> Iterator[Finding]:
    """A rule raised instead of reporting: a bug in nczarr-check, reported so the run still completes."""
    return iter(())


def with_fix(finding: Finding) -> Finding:
    """The finding naming the nczarr-fix fix that cures its rule, when there is one."""
    from nczarr_conformance.fix import fixes  # noqa: F401  (registers the fixes)
    from nczarr_conformance.fix.registry import for_rule

    fix_id = for_rule(finding.rule)
    return dataclasses.replace(finding, fix=fix_id) if fix_id else finding


def check(url: str, *, deep: bool = False, expect: str | None = None, select: list[str] | None = None,
          ignore: list[str] | None = None, fail_on: Severity = Severity.ERROR, client: Any = None,
          for_readers: list[str] | None = None) -> Report:
    """Check the dataset at ``url``; raises only when the store cannot be opened or does not answer (exit 2).

    ``for_readers`` (ids of reader_needs.READERS) keeps only the predictions about those readers (every other rule's
    findings stay): ``nczarr-check --for``.

    A store that stops answering part-way (5xx or cut-short bodies after every retry) is
    "could not check", never a finding: grading it would blame the dataset for the network.
    """
    try:
        return _check(url, deep=deep, expect=expect, select=select, ignore=ignore, fail_on=fail_on, client=client,
                      for_readers=for_readers)
    except StoreUnavailableError as exc:
        raise StoreUnavailableError(f"could not check {url}: {exc}") from exc


def _check(url: str, *, deep: bool, expect: str | None, select: list[str] | None, ignore: list[str] | None,
           fail_on: Severity, client: Any, for_readers: list[str] | None = None) -> Report:
    """The check itself (see :func:`check`).

    Every rule runs (``--deep`` ones with ``deep``); ``select``/``ignore`` (ids or id prefixes)
    choose which findings the report keeps, so a selection never changes what a rule sees.
    A crash of a rule is kept unless NCZ-CHECK-CRASH itself is ignored. ``client`` (a
    ``distributed.Client``) decodes the chunks of ``deep`` on its cluster; the report is the same.
    """
    from nczarr_conformance.checker.plugins import load_rule_plugins

    load_rule_plugins()  # entry points of group nczarr_conformance.rules (once per process)
    keep = set(matching(select)) if select else set(RULES)
    keep -= set(matching(ignore)) if ignore else set()
    if for_readers:
        keep = {rid for rid in keep if set(reader_needs.readers_of_rule(rid) or for_readers) & set(for_readers)}
    started = time.perf_counter()
    spec = parse(url)
    not_a_store = netcdf_file_error(spec, url)
    if not_a_store is not None:
        raise not_a_store
    with open_store(spec) as store:
        ctx = CheckContext(store, url, deep=deep)
        ctx.__dict__["expect"] = expect
        if client is not None and deep:
            from nczarr_conformance.checker.parallel import decode_map

            ctx.__dict__["decode_map"] = decode_map(client, spec)
        if ctx.flavor == "unknown" and is_v3(store):
            ctx.flavor = V3_FLAVOR  # the v2 rule families do not apply: checker/zarr3.py's rules do
        findings: list[Finding] = []
        if ctx.flavor == V3_FLAVOR:
            # the NZ-1.0 rules act on a store claiming it; the draft rules find nothing off a draft store; the
            # reference rules act on an Icechunk repository's virtual chunks (or v3 kerchunk references)
            order = (list(zarr3.V3_RULES) + list(nz.NZ_RULES) + list(draft.DRAFT_RULES)
                     + list(references.REF_RULES))
        elif ctx.flavor == "unknown":
            order = ["NCZ-LAYOUT-NODATASET"]
        else:  # rules reporting what the context recorded run after every rule that reads
            order = [rid for rid, r in RULES.items() if not r.final] + [rid for rid, r in RULES.items() if r.final]
        for rule_id in order:
            r = RULES[rule_id]
            if r.deep and not deep:
                continue
            try:
                findings.extend(r.function(ctx))
            except StoreUnavailableError:
                raise  # a store that did not answer is no finding about the dataset: see check()
            except Exception as exc:  # a rule's exception is a finding, never a crash
                findings.append(get("NCZ-CHECK-CRASH").finding(None, f"{rule_id} raised {type(exc).__name__}: {exc}"))
        if ctx.flavor == V3_FLAVOR and draft.draft_docs(ctx):
            flavor = draft.DRAFT_FLAVOR
        elif ctx.flavor == V3_FLAVOR and nz.applies(ctx):
            flavor = nz.REPORT_FLAVOR
        else:
            flavor = ctx.flavor
        if expect and ctx.flavor in ("unknown", V3_FLAVOR):  # (the v2 families ran NCZ-LAYOUT-FLAVOR above)
            findings.extend(_flavor_differs(flavor, expect))
        crash_kept = not (ignore and RULES["NCZ-CHECK-CRASH"].matches(ignore))
        findings = [f for f in findings if f.rule in keep or (f.rule == "NCZ-CHECK-CRASH" and crash_kept)]
        findings = [with_fix(f) for f in findings]
        run = [rid for rid in order if rid in keep and (deep or not RULES[rid].deep)]
        return Report(url, flavor, findings, ctx.objects_read, time.perf_counter() - started, fail_on, run,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
