"""Implementations from outside join through commands only (issue #24): --reader/--writer/--caps, the TOML
file, and what a run then says about them — cells, spec-rule grades, the summary, the JUnit file.

One run of the real command (``sys.executable -m nczarr_conformance.cli.report``) in a temporary working
directory holding ``nczarr-conformance.toml``, with tiny Python scripts as the outside tools
(tests/conformance/adapters.py): ``good`` reads and writes right, ``wrong`` reads a value one off,
``crash`` exits 3, ``slow`` outlasts its timeout, ``stdout`` prints its model, ``missing`` is a tool that
is not installed. The expected models are the cases' own (conformance/cases.py), never an adapter's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nczarr_conformance.cli import report as report_cli
from tests.conformance.adapters import command, scripts
from tests.conftest import REPO

XSD = REPO / "tests" / "data" / "junit-10.xsd"
ONE_CASE = "nczarr,attributes,scalars"  # the caps that take part in case scalar only


def run_report(cwd: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.report", "report", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("outside")
    reader, writer = scripts(work)
    (work / "nczarr-conformance.toml").write_text(f'''
[implementations.slow]
name = "a reader that hangs"
reader = {json.dumps(command(reader, "slow", "{path}", "{out_json}"))}
caps = {json.dumps(ONE_CASE)}
timeout = 1.5

[implementations.stdout]
reader = {json.dumps(command(reader, "ok", "{url}", "-"))}
caps = [{", ".join(json.dumps(c) for c in ONE_CASE.split(","))}]
env = {{ NCZ_ADAPTER_TEST = "1" }}
''', encoding="utf-8")
    started = time.perf_counter()
    done = run_report(
        work, "--out", "out", "--junit", "out/junit.xml", "--peers", "ours,slow,stdout", "--cases", "scalar,string-var",
        "--rules", "Z.scalar,D.read.1", "--jobs", "3", "--fail-on-skip",
        "--reader", f"good={command(reader, 'ok', '{path}', '{out_json}')}",
        "--writer", f"good={command(writer, '{model_json}', '{path}')}",
        "--reader", f"wrong={command(reader, 'wrong', '{url}', '{out_json}')}", "--caps", f"wrong={ONE_CASE}",
        "--reader", f"crash={command(reader, 'crash', '{path}', '{out_json}')}",
        "--reader", "missing=no-such-tool-ncz24 {url} {out_json}")
    seconds = time.perf_counter() - started
    out = work / "out"
    interop = json.loads((out / "interop.json").read_text()) if (out / "interop.json").exists() else {}
    rules = json.loads((out / "rules.json").read_text()) if (out / "rules.json").exists() else {}
    cells = {(c["case"], c["writer"], c["reader"]): c for c in interop.get("cells", [])}
    return {"done": done, "cells": cells, "interop": interop, "rules": rules, "out": out, "seconds": seconds}


def test_the_run_exits_3_for_the_missing_tool_with_fail_on_skip(outside):
    done = outside["done"]
    assert done.returncode == 3, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert outside["seconds"] < 120


def test_a_command_reader_and_writer_pass_where_they_read_and_write_right(outside):
    cells = outside["cells"]
    for case in ("scalar", "string-var"):
        for writer, reader in (("ours", "good"), ("good", "ours"), ("good", "good")):
            assert cells[(case, writer, reader)]["status"] == "pass", cells[(case, writer, reader)]
    # {url} and stdout: the model JSON printed instead of written to {out_json}
    assert cells[("scalar", "good", "stdout")]["status"] == "pass"


def test_a_planted_wrong_value_is_the_canonical_diff(outside):
    cell = outside["cells"][("scalar", "ours", "wrong")]
    assert (cell["status"], cell["differences"]) == ("deviates", ["/root/variables/d/data: 2.5 != 3.5"])
    assert "warning: planted chatter on stderr" in cell["detail"]  # stderr is kept even when the read worked


def test_exit_status_not_zero_fails_the_cell_with_its_stderr(outside):
    cell = outside["cells"][("string-var", "good", "crash")]
    assert cell["status"] == "fails"
    assert cell["message"] == "reader exit 3: ValueError: planted crash in the reader"
    assert cell["detail"] == "reading the store\nValueError: planted crash in the reader\n"


def test_a_call_past_its_timeout_fails_its_cell(outside):
    cell = outside["cells"][("scalar", "ours", "slow")]
    assert (cell["status"], cell["message"]) == ("fails", "reader timed out after 1.5 s")


def test_capabilities_choose_the_cases_never_the_id(outside):
    cells = outside["cells"]
    for reader in ("wrong", "slow", "stdout"):
        cell = cells[("string-var", "ours", reader)]
        assert (cell["status"], cell["message"]) == ("skipped", f"{reader} does not declare strings (its capabilities)")
    assert cells[("string-var", "ours", "crash")]["status"] == "fails"  # no --caps: it claims everything


def test_a_missing_tool_is_skipped_and_named_in_the_summary(outside):
    cells, err = outside["cells"], outside["done"].stderr
    assert {c["status"] for (_, _, r), c in cells.items() if r == "missing"} == {"skipped"}
    assert cells[("scalar", "ours", "missing")]["message"] == "no-such-tool-ncz24 not installed"
    summary = [line for line in err.splitlines() if line.startswith("nczarr-conformance: summary: ")]
    assert len(summary) == 1, err
    n = sum(1 for c in cells.values() if c["status"] == "skipped" and "missing" in (c["reader"], c["writer"]))
    assert n == 4 and f"{n} for a missing tool (no-such-tool-ncz24 not installed: missing)" in summary[0]
    assert summary[0].startswith(f"nczarr-conformance: summary: {len(cells)} cells, ")
    assert "--fail-on-skip: 4 cells and 2 rule results skipped for a missing tool" in err


def test_the_summary_shows_each_finding_of_an_outside_implementation_by_side(outside):
    err = outside["done"].stderr
    assert ("nczarr-conformance: deviates: scalar: ours → wrong: /root/variables/d/data: writer was given 2.5 / "
            "reader read 3.5") in err.splitlines()
    assert ("nczarr-conformance: fails: scalar: good → crash: reader exit 3: ValueError: planted crash in the "
            "reader") in err.splitlines()


def test_outside_readers_and_writers_get_spec_rule_grades_not_na(outside):
    results = {(r["rule"], r["implementation"]): r for r in outside["rules"]["results"]}
    assert results[("D.read.1", "good")]["status"] == "follows", results[("D.read.1", "good")]
    assert results[("Z.scalar", "good")]["status"] == "follows", results[("Z.scalar", "good")]
    assert results[("D.read.1", "crash")]["status"] == "deviates"
    assert results[("D.read.1", "missing")]["status"] == "skipped"
    assert results[("Z.scalar", "good")]["evidence"] == "case scalar: shape [1]"


def test_the_report_lists_every_implementation_and_why_one_is_missing(outside):
    impls = {i["id"]: i for i in outside["interop"]["implementations"]}
    assert set(impls) == {"ours", "good", "wrong", "crash", "missing", "slow", "stdout"}
    assert impls["missing"]["available"] is False and impls["missing"]["reason"] == "no-such-tool-ncz24 not installed"


def test_junit_marks_the_planted_failure_with_the_canonical_diff(outside):
    import xml.etree.ElementTree as ET

    root = ET.parse(outside["out"] / "junit.xml").getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    wrong = cases[("interop", "scalar[ours → wrong]")].find("failure")
    assert wrong is not None and wrong.get("type") == "deviates"
    assert wrong.get("message") == "/root/variables/d/data: writer was given 2.5 / reader read 3.5"
    crash = cases[("interop", "scalar[good → crash]")]
    assert crash.find("failure").get("message") == "reader exit 3: ValueError: planted crash in the reader"
    assert "planted crash" in crash.find("system-err").text
    skipped = cases[("interop", "scalar[ours → missing]")].find("skipped")
    assert skipped.get("message") == "no-such-tool-ncz24 not installed"
    passed = cases[("interop", "scalar[ours → good]")]  # a pass: no failure, no skip; what it said, in system-err
    assert [child.tag for child in passed] == ["system-err"] and "planted chatter" in passed.find("system-err").text
    assert cases[("rules", "D.read.1[good]")].find("*") is None
    assert len(cases) == len(outside["cells"]) + len(outside["rules"]["results"])


def test_junit_validates_against_the_jenkins_junit_schema(outside):
    import xmlschema  # a [test] dependency: the schema check never skips

    xmlschema.XMLSchema(str(XSD)).validate(str(outside["out"] / "junit.xml"))


# ---- declarations refused in one line, exit 2 ---------------------------------------------------------------

@pytest.mark.parametrize(("args", "line"), [
    (["--reader", "x=tool {nope} {out_json}"],
     "the command line: x reader: unknown placeholder {nope}; known: {url}, {path}, {zip}, {out_json}"),
    (["--reader", "x=tool {out_json}"],
     "the command line: x reader: the command names no store: use {url}, {path} or {zip}"),
    (["--writer", "x=tool {path}"],
     "the command line: x writer: the command has no {model_json} to read the model from"),
    (["--reader", "x=tool 'unclosed {url}"], ("the command line: x reader: cannot split \"tool 'unclosed {url}\": "
                                            "No closing quotation")),
    (["--reader", "x=tool {url}", "--caps", "x=groups,strigs"],
     ("the command line: x caps: unknown capability 'strigs'; known: all, groups, strings, char, scalars, unlimited, "
     "fill, filters, endianness, int64, separator, order, zarr-v3, legacy, references, icechunk, nczarr, "
     "attributes, appendix-d, netcdf-fill, writes-zarr-v3, writes-references, writes-icechunk")),
    (["--caps", "y=groups"], "--caps y: no --reader, --writer or configured implementation 'y'"),
    (["--reader", "bad id=tool {url}"], ("the command line: bad id: an implementation id is letters, digits and "
                                        ". _ + - (not 'bad id')")),
    (["--reader", "ours=tool {url}"], ("peer id 'ours' registered twice: first by nczarr_conformance.peers."
                                      "ours, again by the command line")),
    (["--peers", "nosuch*"], "--peers 'nosuch*' matches no implementation; known: "),
    (["--cases", "nosuch"], "--cases 'nosuch' matches no case; known: numeric-types, "),
    (["--rules", "Q.*"], "--rules 'Q.*' matches no spec rule; known: D.write.1, "),
    (["--config", "nowhere.toml"], "nowhere.toml: --config file not found"),
])
def test_a_bad_declaration_is_one_line_exit_2(args, line, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report_cli.main(["report", "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"nczarr-conformance: {line}"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("toml", "line"), [
    ("[implementations.t]\nreader = 'tool {url}'\ncolour = 'red'\n",
     " [implementations.t]: unknown key 'colour'; known: caps, env, flavor, known, name, preload, reader, requires, "
     "serve, timeout, version, writer"),
    ("[implementations.t]\nreader = 'tool {url}'\nknown = 3\n",
     " [implementations.t]: known must be a file name or an array of tables"),
    ("[implementations.t]\nreader = 'tool {url}'\nknown = 'gone.toml'\n", " [implementations.t]: known file "),
    ("[implementations.t]\nwriter = 'tool {model_json} {path}'\nflavor = 'nczarr-9'\n",
     " [implementations.t]: t: flavor 'nczarr-9' is none of nczarr-4.10, nczarr-2, nczarr-2-upper, zarr"),
    ("[implementations.t]\nreader = 'tool {url}'\nflavor = 'zarr'\n",
     " [implementations.t]: t: a flavor says what a writer writes (no writer command)"),
    ("[implementations.t]\nwriter = 'tool {model_json} {path}'\nserve = 'tool serve'\n",
     " [implementations.t]: t serve: a worker needs the reader it stands for (no reader command)"),
    ("[implementations.t]\nreader = 'tool {url}'\nserve = 'tool serve {path}'\n",
     " [implementations.t]: t serve: unknown placeholder {path}; known: "),
    ("[implementations.t]\nreader = 'tool {url}'\nserve = ['tool']\n", " [implementations.t]: serve must be a string"),
    ("[implementations.t]\nreader = 'tool {url}'\ntimeout = 'soon'\n",
     " [implementations.t]: timeout must be a number of seconds"),
    ("[peers.t]\nreader = 'tool {url}'\n", ": unknown table 'peers' (expected [implementations.NAME])"),
    ("[implementations.t\n", ": not TOML: "),
])
def test_a_bad_config_file_is_one_line_exit_2_naming_it(toml, line, capsys, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(toml, encoding="utf-8")
    assert report_cli.main(["report", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"nczarr-conformance: {config}{line}"), err


def test_list_caps_prints_the_vocabulary(capsys):
    from nczarr_conformance.peers.capabilities import CAPABILITIES

    assert report_cli.main(["report", "--list-caps"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in CAPABILITIES)
