"""Check reports as one SARIF 2.1.0 log (``nczarr-check --format sarif``): what code-scanning CI reads.

One run for every URL checked; one result per finding (``ruleId``, ``level``, the message, the object key as
both the artifact location, relative to the store's base URI, and a logical location), in the report order;
``tool.driver`` names nczarr-check, its version and every rule run or found, each with its ``helpUri`` into
docs/rules.md. A finding some fix cures carries the ``nczarr-fix`` command in its message and in
``properties.fixCommand``: SARIF's own ``fixes`` member needs the replaced bytes of each object, which
nczarr-fix computes only when it runs, so it is left out rather than filled with a made-up edit.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nczarr_conformance.checker.report import (
    RULES_DOC,
    Report,
    fix_command,
    register_format,
    rule_help_uri,
    tool_version,
)
from nczarr_conformance.checker.rules import RULES, Severity

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _base_uri(url: str) -> str:
    """The store as an absolute URI ending in ``/`` (a local path as file://; a URL's fragment left out)."""
    bare = url.split("#", 1)[0]
    if "://" not in bare:
        bare = Path(bare).resolve().as_uri()
    return bare.rstrip("/") + "/"


def _descriptor(rule_id: str) -> dict[str, Any]:
    rule = RULES.get(rule_id)
    doc: dict[str, Any] = {"id": rule_id, "helpUri": rule_help_uri(rule_id)}
    if rule is not None:
        doc["shortDescription"] = {"text": rule.description or rule_id}
        doc["defaultConfiguration"] = {"level": LEVEL[rule.severity]}
        doc["properties"] = {"source": rule.source, "deep": rule.deep}
    return doc


def sarif_log(reports: list[Report]) -> dict[str, Any]:
    """The SARIF log of ``reports`` (a JSON document)."""
    ids = sorted({rid for r in reports for rid in r.rules_run} | {f.rule for r in reports for f in r.findings})
    index = {rid: i for i, rid in enumerate(ids)}
    bases = {f"STORE{i}": {"uri": _base_uri(r.url)} for i, r in enumerate(reports)}
    results = []
    for i, report in enumerate(reports):
        for f in report.ordered():
            command = fix_command(f, report.url)
            result: dict[str, Any] = {
                "ruleId": f.rule, "ruleIndex": index[f.rule], "level": LEVEL[f.severity],
                "message": {"text": f.message + (f" Fix: {command}" if command else "")},
                "properties": {"store": report.url, "flavor": report.flavor},
            }
            if f.key is not None:
                result["locations"] = [{
                    "physicalLocation": {"artifactLocation": {"uri": f.key.lstrip("/") or ".",
                                                              "uriBaseId": f"STORE{i}"}},
                    "logicalLocations": [{"fullyQualifiedName": f.key, "kind": "object"}],
                }]
            if command is not None:
                result["properties"].update({"fix": f.fix, "fixCommand": command})
            results.append(result)
    times = sorted(r.checked_at for r in reports if r.checked_at)
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if times:
        invocation["endTimeUtc"] = times[-1]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "nczarr-check", "version": tool_version(), "informationUri": RULES_DOC,
                                "rules": [_descriptor(rid) for rid in ids]}},
            "originalUriBaseIds": bases,
            "invocations": [invocation],
            "results": results,
        }],
    }


register_format("sarif", lambda reports: json.dumps(sarif_log(reports), ensure_ascii=False, indent=1) + "\n")
