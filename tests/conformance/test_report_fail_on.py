"""``nczarr-conformance report --fail-on fail|deviate``: a graded implementation's failures gate its CI.

Each test is one run of the real command (``sys.executable -m nczarr_conformance.cli.report``) on the one
case ``scalar``, with ours and one outside reader declared in ``nczarr-conformance.toml``
(tests/conformance/adapters.py's scripts): ``crash`` exits 3 (its cell fails), ``wrong`` reads the scalar one
off (its cell deviates), ``good`` reads right. What each cell is comes from the case's own model
(conformance/cases.py), never from the adapter; the exit codes are the ones cli/report.py documents.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.adapters import command, scripts
from tests.conformance.test_adapters import ONE_CASE, run_report

pytestmark = pytest.mark.peer


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fail-on")
    reader, _ = scripts(directory)
    tables = "".join(f'''
[implementations.{name}]
reader = {json.dumps(command(reader, mode, "{path}", "{out_json}"))}
caps = {json.dumps(ONE_CASE)}
''' for name, mode in (("crash", "crash"), ("wrong", "wrong"), ("good", "ok")))
    (directory / "nczarr-conformance.toml").write_text(tables, encoding="utf-8")
    return directory


def report(work: Path, graded: str, *flags: str) -> tuple[int, str, dict[tuple[str, str, str], str]]:
    """Exit status, stderr and each cell's status of a run of ours and ``graded`` on case scalar."""
    out = work / f"out-{graded}-{'-'.join(flags) or 'plain'}"
    done = run_report(work, "--out", str(out), "--peers", f"ours,{graded}", "--cases", "scalar",
                      "--rules", "D.read.1", "--jobs", "2", *flags)
    assert "Traceback" not in done.stderr, done.stderr
    cells = json.loads((out / "interop.json").read_text())["cells"] if (out / "interop.json").exists() else []
    return done.returncode, done.stderr, {(c["case"], c["writer"], c["reader"]): c["status"] for c in cells}


def test_fail_on_fail_exits_1_naming_a_failing_cell(work):
    code, err, cells = report(work, "crash", "--fail-on", "fail")
    assert cells[("scalar", "ours", "crash")] == "fails"
    assert code == 1, err[-2000:]
    assert "nczarr-conformance: --fail-on fail: scalar: ours → crash fails" in err.splitlines()


def test_without_fail_on_the_same_failure_exits_0(work):
    code, err, cells = report(work, "crash")
    assert cells[("scalar", "ours", "crash")] == "fails"
    assert code == 0, err[-2000:]


def test_fail_on_fail_lets_a_deviation_pass_and_fail_on_deviate_does_not(work):
    code, err, cells = report(work, "wrong", "--fail-on", "fail")
    assert cells[("scalar", "ours", "wrong")] == "deviates"
    assert code == 0, err[-2000:]
    code, err, _ = report(work, "wrong", "--fail-on", "deviate")
    assert code == 1, err[-2000:]
    assert "nczarr-conformance: --fail-on deviate: scalar: ours → wrong deviates" in err.splitlines()


def test_fail_on_deviate_names_a_spec_rule_the_implementation_deviates_from(work):
    """The crashing reader reads nothing, so spec rule D.read.1 grades it ``deviates`` (test_adapters.py)."""
    code, err, _ = report(work, "crash", "--fail-on", "deviate")
    assert code == 1, err[-2000:]
    assert "nczarr-conformance: --fail-on deviate: D.read.1: crash deviates" in err.splitlines()


def test_fail_on_deviate_exits_0_for_an_implementation_that_reads_right(work):
    code, err, cells = report(work, "good", "--fail-on", "deviate")
    assert cells[("scalar", "ours", "good")] == "pass"
    assert code == 0, err[-2000:]


def test_fail_on_without_an_implementation_to_grade_is_a_usage_error(work):
    code, err, _ = report(work, "zarr-python", "--fail-on", "fail")
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("nczarr-conformance: --fail-on fail: no implementation from "
                                                   "outside runs to grade")
