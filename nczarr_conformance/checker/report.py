"""Rendering of check reports as text, JSON or one self-contained HTML page; no checking here."""
from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nczarr_conformance.checker.rules import Finding, Severity

REPORT_ID = "nczarr-check/1"
#: where each rule is documented (docs/rules.md gives every row the anchor ``rule_anchor``)
RULES_DOC = "https://github.com/nczarr-conformance/nczarr-conformance/blob/main/docs/rules.md"


def rule_anchor(rule_id: str) -> str:
    """The rule's anchor in docs/rules.md: its id in lower case (``ncz-interop-zarr-char``)."""
    return rule_id.lower()


def rule_help_uri(rule_id: str) -> str:
    return f"{RULES_DOC}#{rule_anchor(rule_id)}"


def tool_version() -> str:
    """The installed distribution's version (what ``nczarr-check --version`` prints), "unknown" without one:
    the package's own ``__version__`` lies above this wing (its ``__init__`` imports ``access``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nczarr-conformance")
    except PackageNotFoundError:
        return "unknown"


def fix_command(finding: Finding, url: str) -> str | None:
    """The nczarr-fix command that cures the finding (``--for`` its fix's readers), or None when no fix does."""
    if finding.fix is None:
        return None
    from nczarr_conformance.fix.registry import FIXES

    f = FIXES.get(finding.fix)
    if f is None:
        return None
    scope = "" if f.always else f" --for {','.join(f.readers)}"
    return f"nczarr-fix{scope} {shlex.quote(url)}"
RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass
class Report:
    url: str
    flavor: str
    findings: list[Finding] = field(default_factory=list)
    objects_read: int = 0
    seconds: float = 0.0
    fail_on: Severity = Severity.ERROR  # the least severe finding that makes the exit code 1
    rules_run: list[str] = field(default_factory=list)  # the rules run and kept (--select/--ignore): JUnit's cases
    checked_at: str = ""  # when the check ended, UTC ISO 8601 (the HTML page and SARIF show it)
    #: ``nczarr-check --readers``: each reader tried for real, beside what the findings predict of it
    #: (``{"reader", "predicted", "tried", "said"}``); empty unless asked
    readers: list[dict[str, Any]] = field(default_factory=list)

    def ordered(self) -> list[Finding]:
        """The findings as every format lists them: errors, then warnings, then infos; by rule id, then key."""
        return sorted(self.findings, key=lambda f: (-RANK[f.severity], f.rule, f.key or ""))

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def exit_code(self) -> int:
        return 1 if any(RANK[f.severity] >= RANK[self.fail_on] for f in self.findings) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "report": REPORT_ID,
            "url": self.url,
            "flavor": self.flavor,
            "findings": [f.to_json() for f in self.ordered()],
            "summary": {"errors": self.count(Severity.ERROR), "warnings": self.count(Severity.WARNING),
                        "infos": self.count(Severity.INFO), "objects_read": self.objects_read,
                        "seconds": round(self.seconds, 3)},
            **({"readers": self.readers} if self.readers else {}),
        }

    def summary_line(self) -> str:
        return (f"{self.url}: flavor {self.flavor}; {self.count(Severity.ERROR)} errors, "
                f"{self.count(Severity.WARNING)} warnings, {self.count(Severity.INFO)} infos; "
                f"{self.objects_read} objects read")

    def to_text(self) -> str:
        lines = [f"{f.severity} {f.rule} {f.key if f.key is not None else '-'}: {f.message}"
                 + (f" (fix: {f.fix})" if f.fix else "") for f in self.ordered()]
        lines.append(self.summary_line())
        if self.readers:
            lines.append("who can open this store (predicted by the findings; tried for real):")
            lines += [f"  {r['reader']}: predicted {r['predicted']}; tried: {r['tried']}"
                      + (f" ({r['said']})" if r["said"] else "") for r in self.readers]
        return "\n".join(lines) + "\n"

    def to_html_section(self) -> str:
        e = html.escape

        def fix_cell(f: Finding) -> str:
            command = fix_command(f, self.url)
            return f"<code>{e(command)}</code> ({e(f.fix or '')})" if command else ""

        rows = "".join(f'<tr class="{e(str(f.severity))}"><td>{e(str(f.severity))}</td><td><a href="'
                       f'{e(rule_help_uri(f.rule))}"><code>{e(f.rule)}</code></a></td><td><code>{e(f.key or "-")}'
                       f'</code></td><td>{e(f.message)}</td><td>{fix_cell(f)}</td></tr>\n'
                       for f in self.ordered())
        table = ('<table><tr><th>severity</th><th>rule</th><th>key</th><th>message</th><th>fix</th></tr>\n'
                 f"{rows}</table>") if self.findings else "<p>No findings.</p>"
        when = f"<p>checked {e(self.checked_at)}</p>\n" if self.checked_at else ""
        return f"<section><h2>{e(self.url)}</h2>\n<p>{e(self.summary_line())}</p>\n{when}{table}\n</section>\n"

    def render(self, fmt: str) -> str:
        return render_reports([self], fmt)

    def __repr__(self) -> str:
        """What ``nczarr-check`` prints (a finding a line, then the summary), under a title line: at a
        prompt, ``report`` reads like the command's output instead of one dataclass line."""
        return f"<Report {self.url}: exit code {self.exit_code}>\n{self.to_text().rstrip()}"

    def _repr_html_(self) -> str:
        """A notebook shows the section of ``nczarr-check --format html``: the findings' table, rules linked."""
        return self.to_html_section()


STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
tr.error td:first-child{background:#f8d0d0}tr.warning td:first-child{background:#fbeec0}
tr.info td:first-child{background:#dde8f8}"""


def html_page(title: str, body: str) -> str:
    """One self-contained page: inline style, no script, no external asset; ``body`` is already escaped."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


#: a format's renderer by ``--format`` name; text, JSON and HTML are this module's, SARIF and JUnit XML
#: register from their own modules (``checker/__init__`` imports them), so neither is imported from here
RENDERERS: dict[str, Callable[[list[Report]], str]] = {}


def register_format(name: str, render: Callable[[list[Report]], str]) -> None:
    """Add ``--format NAME``; a second renderer for one name is refused, naming it."""
    if name in RENDERERS:
        raise ValueError(f"report format {name!r} is registered twice")
    RENDERERS[name] = render


def _json(reports: list[Report]) -> str:
    doc: Any = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def _html(reports: list[Report]) -> str:
    return html_page(f"nczarr-check {tool_version()} report", "".join(r.to_html_section() for r in reports))


def _text(reports: list[Report]) -> str:
    return "".join(r.to_text() for r in reports)


register_format("text", _text)
register_format("json", _json)
register_format("html", _html)


def render_reports(reports: list[Report], fmt: str) -> str:
    """Reports in one format: text one after another; JSON one object, or an array of them for several URLs;
    HTML one page with a section per report; SARIF 2.1.0 one run; JUnit XML one testsuite per report."""
    return RENDERERS.get(fmt, _text)(reports)
