"""The rule registry as documentation: docs/rules.md and ``nczarr-check --list-rules``.

``python -m nczarr_conformance.checker.docs > docs/rules.md`` regenerates the file; a test
fails if it is stale.
"""
from __future__ import annotations

import html
import json
import sys

from nczarr_conformance.checker import RULES
from nczarr_conformance.checker.report import html_page, rule_anchor
from nczarr_conformance.checker.rules import Rule

HEADER = """# nczarr-check rules

One line per rule: its stable id, its severity, what it checks and what it stands on.
Generated from the registry (`python -m nczarr_conformance.checker.docs > docs/rules.md`);
a test fails if this file is stale. Rules marked *deep* run with `--deep` only. Each row's anchor is
its id in lower case (`#ncz-interop-zarr-char`): where `--format sarif` and the HTML report link.

| rule | severity | checks | source |
|---|---|---|---|
"""


def _rules() -> list[Rule]:
    return sorted(RULES.values(), key=lambda r: r.id)


def _severity(r: Rule) -> str:
    return f"{r.severity}{' (deep)' if r.deep else ''}"


def render() -> str:
    """docs/rules.md."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [f'| <a id="{rule_anchor(r.id)}"></a>`{r.id}` | {_severity(r)} | {cell(r.description)} | {cell(r.source)} |'
            for r in _rules()]
    return HEADER + "\n".join(rows) + "\n"


def render_list(fmt: str) -> str:
    """``--list-rules``: id, severity, what, source; text one rule a line (tab-separated), JSON or HTML."""
    if fmt == "json":
        doc = [{"rule": r.id, "severity": str(r.severity), "deep": r.deep, "checks": r.description,
                "source": r.source} for r in _rules()]
        return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if fmt == "html":
        e = html.escape
        rows = "".join(f"<tr><td><code>{e(r.id)}</code></td><td>{e(_severity(r))}</td><td>{e(r.description)}</td>"
                       f"<td>{e(r.source)}</td></tr>\n" for r in _rules())
        return html_page("nczarr-check rules", "<table><tr><th>rule</th><th>severity</th><th>checks</th>"
                         f"<th>source</th></tr>\n{rows}</table>\n")
    return "".join(f"{r.id}\t{_severity(r)}\t{r.description}\t{r.source}\n" for r in _rules())


if __name__ == "__main__":
    sys.stdout.write(render())
