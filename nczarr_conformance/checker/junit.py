"""Check reports as JUnit XML (``nczarr-check --format junit``): what CI test reporters read.

One ``testsuite`` per URL checked, one ``testcase`` per rule run (``--select``/``--ignore`` applied), named by
its id. A rule with a finding at the ``--fail-on`` level or above is a ``failure`` (the findings, one line
each, with the ``nczarr-fix`` command that cures them, as its text); one with findings below that level
passes, its findings in ``system-out``. The shape of Jenkins' junit-10.xsd, which the tests validate against.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from nczarr_conformance.checker.report import RANK, Report, fix_command, register_format

if TYPE_CHECKING:  # ElementTree is imported by junit_xml: every nczarr-check imports this module to register it
    import xml.etree.ElementTree as ET

#: characters XML 1.0 cannot hold (a message may quote any byte of a store)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _suite(report: Report) -> ET.Element:
    import xml.etree.ElementTree as ET

    by_rule: dict[str, list[str]] = {}
    failing: set[str] = set()
    for f in report.ordered():
        command = fix_command(f, report.url)
        by_rule.setdefault(f.rule, []).append(f"{f.severity} {f.key or '-'}: {f.message}"
                                              + (f" (fix: {command})" if command else ""))
        if RANK[f.severity] >= RANK[report.fail_on]:
            failing.add(f.rule)
    rules = list(dict.fromkeys([*report.rules_run, *by_rule]))
    suite = ET.Element("testsuite", name=_xml(report.url), tests=str(len(rules)), failures=str(len(failing)),
                       errors="0", skipped="0", time=f"{report.seconds:.3f}", timestamp=report.checked_at)
    for rule_id in rules:
        case = ET.SubElement(suite, "testcase", classname="nczarr-check", name=rule_id)
        lines = by_rule.get(rule_id, [])
        if rule_id in failing:
            failure = ET.SubElement(case, "failure", type=rule_id, message=_xml(lines[0]))
            failure.text = _xml("\n".join(lines))
        elif lines:
            ET.SubElement(case, "system-out").text = _xml("\n".join(lines))
    return suite


def junit_xml(reports: list[Report]) -> str:
    """The JUnit XML document of ``reports``."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    for report in reports:
        root.append(_suite(report))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


register_format("junit", junit_xml)
