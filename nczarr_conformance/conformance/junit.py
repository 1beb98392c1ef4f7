"""The run as JUnit XML (``nczarr-conformance report --junit FILE``): what CI systems read.

One ``testcase`` per writer × reader × case (suite ``interop``, named ``CASE[WRITER → READER]``) and per
spec rule × implementation (suite ``rules``, named ``RULE[IMPLEMENTATION]``), in the shape of the
JUnit schema Jenkins, GitLab and GitHub's test reporters read (Jenkins xunit-plugin's ``junit-10.xsd``;
tests/data/junit-10.xsd, which the tests validate against):

- a deviation is a ``failure`` whose message is the canonical diff's first line worded by its side
  (``writer was given … / reader read …``) and whose text is every difference;
- a reader or writer that failed is a ``failure`` with what it said (a command's stderr in
  ``system-err``);
- a skipped cell is ``skipped`` with the reason (a missing tool names it);
- a known peer fault (conformance/gate.py, its evidence holding) and a documented deviation of ours are
  ``skipped`` of type ``xfail``, as pytest writes an expected failure, with the diff as their text.
"""
from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import UTC, datetime

from nczarr_conformance.conformance.matrix import Cell, MatrixRun
from nczarr_conformance.conformance.render import sided
from nczarr_conformance.conformance.rules import DOCUMENTED_DEVIATIONS, Result

#: characters XML 1.0 cannot hold (a command's stderr may have any byte)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", value)


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _cell_case(cell: Cell, known: dict[tuple[str, str, str], str]) -> ET.Element:
    case = ET.Element("testcase", {"classname": "interop", "name": _text(f"{cell.case}[{cell.writer} → {cell.reader}]"),
                                   "time": _seconds(cell.seconds)})
    lines = [sided(d) for d in cell.differences] + ([cell.message] if cell.message else [])
    why = known.get((cell.case, cell.writer, cell.reader))
    if why is not None and cell.status in ("deviates", "fails"):
        ET.SubElement(case, "skipped", {"type": "xfail", "message": _text(f"known peer fault: {why}")}).text = \
            _text("\n".join(lines))
    elif cell.status == "deviates":
        more = f" (+{len(cell.differences) - 1} more)" if len(cell.differences) > 1 else ""
        ET.SubElement(case, "failure", {"type": "deviates", "message": _text(lines[0] + more)}).text = \
            _text("\n".join(lines))
    elif cell.status == "fails":
        ET.SubElement(case, "failure", {"type": "fails", "message": _text(cell.message)}).text = _text(cell.message)
    elif cell.status == "skipped":
        ET.SubElement(case, "skipped", {"type": "skipped", "message": _text(cell.message)})
    if cell.detail:
        ET.SubElement(case, "system-err").text = _text(cell.detail)
    return case


def _rule_case(result: Result) -> ET.Element:
    case = ET.Element("testcase", {"classname": "rules", "name": _text(f"{result.rule}[{result.implementation}]"),
                                   "time": _seconds(0)})
    evidence = _text(result.evidence)
    if result.status == "deviates" and (result.rule, result.implementation) in DOCUMENTED_DEVIATIONS:
        ET.SubElement(case, "skipped", {"type": "xfail", "message": evidence})
    elif result.status == "deviates":
        ET.SubElement(case, "failure", {"type": "deviates", "message": evidence}).text = evidence
    elif result.status in ("not-applicable", "skipped"):
        ET.SubElement(case, "skipped", {"type": result.status, "message": evidence})
    return case


def _suite(name: str, cases: Iterable[ET.Element], stamp: str, host: str) -> ET.Element:
    items = list(cases)
    suite = ET.Element("testsuite", {
        "name": name, "tests": str(len(items)),
        "failures": str(sum(1 for c in items if c.find("failure") is not None)), "errors": "0",
        "skipped": str(sum(1 for c in items if c.find("skipped") is not None)),
        "time": _seconds(sum(float(c.get("time", "0")) for c in items)), "timestamp": stamp, "hostname": host})
    suite.extend(items)
    return suite


def junit_xml(run: MatrixRun, results: list[Result], known: dict[tuple[str, str, str], str],
              generated: str | None = None) -> str:
    """The JUnit document of a run (``known``: gate.known_faults of it)."""
    stamp = generated or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    host = socket.gethostname() or "localhost"
    root = ET.Element("testsuites", {"name": "nczarr-conformance"})
    root.append(_suite("interop", (_cell_case(c, known) for c in run.cells), stamp, host))
    root.append(_suite("rules", (_rule_case(r) for r in results), stamp, host))
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    root.set("time", _seconds(sum(float(s.get("time", "0")) for s in root)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


#: the outcomes :func:`count` tells apart, in the order the Action's outputs list them
OUTCOMES = ("passed", "failed", "xfailed", "skipped")


def count(text: str) -> dict[str, int]:
    """Each testcase's outcome in a JUnit document (pytest's ``--junitxml`` or ours), counted.

    ``failure`` or ``error``: failed; ``skipped`` of type ``pytest.xfail`` or ``xfail`` (an expected failure,
    a known peer fault): xfailed; any other ``skipped``: skipped; nothing of these: passed. Raises ValueError
    for a document that is not JUnit XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"not JUnit XML: the root is <{root.tag}>, not <testsuites> or <testsuite>")
    counts = dict.fromkeys(OUTCOMES, 0)
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
        elif skipped is not None:
            counts["xfailed" if skipped.get("type") in ("pytest.xfail", "xfail") else "skipped"] += 1
        else:
            counts["passed"] += 1
    return counts
