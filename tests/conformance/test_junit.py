"""``--junit``: every kind of cell and rule result as the JUnit CI systems read, validated against Jenkins'
junit-10.xsd (tests/data, from pytest 9.0.3's sdist) with xmlschema; and the wording of a difference by side."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from nczarr_conformance.conformance.junit import junit_xml
from nczarr_conformance.conformance.matrix import Cell, MatrixRun
from nczarr_conformance.conformance.render import sided
from nczarr_conformance.conformance.rules import Result
from tests.conftest import REPO

SCHEMA = xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit-10.xsd"))


def _run() -> MatrixRun:
    cells = [
        Cell("scalar", "w", "r", "pass", seconds=0.25),
        Cell("scalar", "w", "bad", "deviates", ["/root/variables/d/data: 2.5 != 3.5", ("/root/attributes/a: only in "
                                                "first")]),
        Cell("scalar", "w", "crash", "fails", [], "reader exit 3: boom", "line 1\nboom \x00\x1b[31m\n"),
        Cell("scalar", "w", "gone", "skipped", [], "gone-tool not installed"),
        Cell("char-var", "ours", "peer", "fails", [], "ValueError: no >S1"),
    ]
    return MatrixRun([], cells, {}, Path("/nowhere"))


def _results() -> list[Result]:
    return [Result("E.char", "w", "follows", "case char-var: char written as >S1"),
            Result("Z.fill", "w", "deviates", "case default-fill: fill_value 9.96921e+36"),
            Result("D.write.3", "ours", "deviates", "documented deviation, by choice"),
            Result("D.read.1", "r", "not-applicable", "not a netCDF reader"),
            Result("E.string", "gone", "skipped", "gone-tool not installed")]


@pytest.fixture
def document() -> ET.Element:
    text = junit_xml(_run(), _results(), {("char-var", "ours", "peer"): "the peer refuses >S1"}, "2026-01-01T00:00:00")
    SCHEMA.validate(text)
    return ET.fromstring(text)


def _case(root: ET.Element, name: str) -> ET.Element:
    return next(c for c in root.iter("testcase") if c.get("name") == name)


def test_each_cell_and_result_is_one_testcase_and_the_counts_add_up(document):
    suites = {s.get("name"): s for s in document}
    assert [(s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped")) for s in suites.values()] == [
        ("5", "2", "0", "2"), ("5", "1", "0", "3")]
    assert (document.get("tests"), document.get("failures")) == ("10", "3")
    assert _case(document, "scalar[w → r]").get("time") == "0.250"


def test_a_deviation_fails_with_the_canonical_diff_worded_by_side(document):
    failure = _case(document, "scalar[w → bad]").find("failure")
    assert failure.get("message") == "/root/variables/d/data: writer was given 2.5 / reader read 3.5 (+1 more)"
    assert failure.text == ("/root/variables/d/data: writer was given 2.5 / reader read 3.5\n"
                            "/root/attributes/a: writer was given it / reader read nothing there")


def test_a_failing_reader_keeps_what_it_said_in_system_err(document):
    case = _case(document, "scalar[w → crash]")
    assert case.find("failure").get("message") == "reader exit 3: boom"
    assert case.find("system-err").text == "line 1\nboom \ufffd\ufffd[31m\n"  # XML 1.0 cannot hold NUL or ESC


def test_known_peer_faults_and_documented_deviations_are_expected_failures(document):
    known = _case(document, "char-var[ours → peer]").find("skipped")
    assert (known.get("type"), known.get("message")) == ("xfail", "known peer fault: the peer refuses >S1")
    assert _case(document, "D.write.3[ours]").find("skipped").get("type") == "xfail"
    assert _case(document, "Z.fill[w]").find("failure").get("message") == "case default-fill: fill_value 9.96921e+36"
    assert _case(document, "D.read.1[r]").find("skipped").get("type") == "not-applicable"
    assert _case(document, "scalar[w → gone]").find("skipped").get("message") == "gone-tool not installed"


def test_a_document_outside_the_schema_is_refused():
    """The schema check is not vacuous: a testcase without its required name fails validation."""
    bad = '<testsuites><testsuite name="x" tests="1" failures="0" errors="0"><testcase/></testsuite></testsuites>'
    assert not SCHEMA.is_valid(bad)


@pytest.mark.parametrize(("line", "worded"), [
    ("/root/variables/d/data: 2.5 != 3.5", "/root/variables/d/data: writer was given 2.5 / reader read 3.5"),
    ("/root/attributes/x: only in first", "/root/attributes/x: writer was given it / reader read nothing there"),
    ("/root/attributes/_nczarr_attr: only in second", ("/root/attributes/_nczarr_attr: writer was not given it / "
                                                      "reader read it")),
    ('/root/attributes/t/value: "a != b" != "c"',
     '/root/attributes/t/value: writer was given "a != b" / reader read "c"'),
    ("… and 11 more differences", "… and 11 more differences"),
])
def test_sided_names_the_writer_and_the_reader(line, worded):
    assert sided(line) == worded
