"""scripts/mutation's own logic: which mutants are never evaluated, which tests a mutant gets."""
from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutation"


@pytest.fixture(scope="module")
def tool() -> dict[str, Any]:
    return runpy.run_path(str(SCRIPT), run_name="scripts_mutation")


SOURCE = '''from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    LIMIT = 1 + 1


def f(a: int | None, b: int = 2) -> int | None:
    x: int | None = a or b
    return x
'''


def _mutants(source: str) -> list[tuple[str, tuple[int, int]]]:
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.plugins import get_operator, operator_names

    found = []
    for name in operator_names():
        operator = get_operator(name)
        if operator.arguments():
            continue
        for node in ast_nodes(get_ast(source)):
            found += [(name, start) for start, _ in operator().mutation_positions(node)]
    return found


def test_mutants_in_annotations_and_type_checking_blocks_are_never_evaluated(tool: dict[str, Any]) -> None:
    spans = tool["unevaluated_spans"](SOURCE)
    skipped = {(op, pos) for op, pos in _mutants(SOURCE) if any(a <= pos < b for a, b, _ in spans)}
    kept = {(op, pos) for op, pos in _mutants(SOURCE)} - skipped
    assert {pos[0] for _, pos in skipped} == {6, 9}             # 1 + 1 and the def's two annotations
    assert ("core/ReplaceOrWithAnd", (10, 22)) in kept          # a or b is code
    assert ("core/NumberReplacer", (9, 30)) in kept             # the default b = 2 is evaluated
    assert not any(pos[0] == 9 and op.startswith("core/ReplaceBinaryOperator_BitOr") for op, pos in kept)


def test_a_line_run_only_at_import_gets_every_test_of_its_module(tool: dict[str, Any]) -> None:
    cmap = tool["CoverageMap"](times={"f1.py::b": 2.0, "f1.py::a": 0.5, "f2.py::c": 1.0, "f2.py::bad": 0.1},
                               failed={"f2.py::bad"},
                               lines={"pkg/m.py": {1: {""}, 5: {"f1.py::b", ""}, 7: {"f1.py::a"},
                                                   9: {"f2.py::c", "f2.py::bad"}}})
    select = tool["Selector"](cmap)
    mutant = tool["Mutant"]

    def chosen(line: int) -> tuple[list[str], str]:
        sel = select(mutant("j", "pkg/m.py", "op", 0, line, 0, line, 1))
        return sel.tests, sel.why

    everything = (["f2.py::c", "f1.py::a", "f1.py::b"], "the line runs at import: every test of the module")
    assert chosen(7) == (["f1.py::a"], "tests executing the line")
    assert chosen(9) == (["f2.py::c"], "tests executing the line")        # a test failing unmutated is left out
    # quickest file first, a file's tests together (module fixtures are set up once) in node-id order
    assert chosen(1) == everything
    # run at import by pytest (context "") and by f1.py::b's subprocess: pytest's import served every test of the
    # module (attrs.py's UINT64_MAX survived with only the subprocess tests, the in-process one that kills it left out)
    assert chosen(5) == everything
    assert chosen(3) == ([], "no test executes this line")


def test_function_map_selection_survives_moved_lines(tool: dict[str, Any], tmp_path: Path) -> None:
    doc = {"recorded_for": "x", "tests": ["tests/mutation/test_script.py::t1"], "times": [1.0],
           "functions": {"nczarr_conformance/keys.py": {"join": [0]}}}
    select = tool["FunctionSelector"](doc, [])
    source = (SCRIPT.parents[1] / "nczarr_conformance" / "keys.py").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.startswith("def join("))
    sel = select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line + 1, 4, line + 1, 5))
    assert sel.tests == ["tests/mutation/test_script.py::t1"]


def test_function_map_runs_only_the_tests_pytest_still_collects(tool: dict[str, Any]) -> None:
    """A test renamed or removed since the map was recorded is left out: pytest would stop at its node id with
    "not found" and the whole CI step would judge nothing (every mutant an error, as seen after a rename)."""
    kept, gone = "tests/mutation/test_script.py::t1", "tests/mutation/test_script.py::renamed_since"
    doc = {"recorded_for": "x", "tests": [kept, gone], "times": [1.0, 1.0],
           "functions": {"nczarr_conformance/keys.py": {"join": [0, 1]}}}
    select = tool["FunctionSelector"](doc, [], {kept})
    source = (SCRIPT.parents[1] / "nczarr_conformance" / "keys.py").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.startswith("def join("))
    sel = select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line + 1, 4, line + 1, 5))
    assert sel.tests == [kept]


def test_function_map_gives_a_line_run_at_import_every_test_of_its_module(tool: dict[str, Any]) -> None:
    """A def's own line (its defaults, decorators) and module-level code run when the module is imported: the tests
    that ran the function's body, or the module-level code in a subprocess, are not all that can see them."""
    doc = {"recorded_for": "x", "tests": ["t.py::imports", "t.py::joins", "t.py::splits"], "times": [1.0, 1.0, 1.0],
           "functions": {"nczarr_conformance/keys.py": {"<module>": [0], "join": [1], "split": [2]}}}
    select = tool["FunctionSelector"](doc, [])
    select.functions = {f: {q: {doc["tests"][i] for i in ids} for q, ids in qs.items()}  # no t.py on disk
                        for f, qs in doc["functions"].items()}
    source = (SCRIPT.parents[1] / "nczarr_conformance" / "keys.py").read_text(encoding="utf-8").splitlines()
    header = next(i for i, text in enumerate(source, 1) if text.startswith("def join("))

    def chosen(line: int) -> tuple[list[str], str]:
        sel = select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line, 4, line, 5))
        return sel.tests, sel.why

    assert chosen(header + 2) == (["t.py::joins"], "tests that executed join when the map was recorded")
    everything = (["t.py::imports", "t.py::joins", "t.py::splits"],
                  "the line runs at import: every test of the module in the map")
    assert chosen(header) == everything
    assert chosen(1) == everything  # the module docstring's line: module level


def test_rejudge_runs_the_maps_tests_still_collected_and_every_newer_test(tool: dict[str, Any]) -> None:
    """--rejudge's selection: the map's tests for the mutant that pytest still collects, plus every test the map
    does not know (the tool's own tests aside), minus tests seen failing unmutated; files holding both first, then
    the map's other files, then the other new tests; a file's tests together, quickest file first."""
    doc = {"recorded_for": "x", "tests": ["a.py::old", "b.py::slow", "b.py::gone", "c.py::quick"],
           "times": [1.0, 50.0, 1.0, 0.5], "functions": {"nczarr_conformance/keys.py": {"join": [0, 1, 2, 3]}}}
    base = tool["FunctionSelector"](doc, [])
    base.functions = {"nczarr_conformance/keys.py": {"join": set(doc["tests"])}}
    collected = {"a.py::old", "b.py::slow", "c.py::quick", "a.py::new", "d.py::new", "e.py::new", "e.py::broken",
                 "tests/mutation/test_script.py::t"}
    select = tool["RejudgeSelector"](base, collected)
    select.excluded.add("e.py::broken")
    assert select.new == ["a.py::new", "d.py::new", "e.py::broken", "e.py::new"]
    source = (SCRIPT.parents[1] / "nczarr_conformance" / "keys.py").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.startswith("def join(")) + 2
    sel = select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line, 4, line, 5))
    assert sel.tests == ["a.py::new", "a.py::old",   # old and new together, before the map's other files
                         "c.py::quick", "b.py::slow",  # the map's files, quickest first; b.py::gone not collected
                         "d.py::new", "e.py::new"]    # then the other new tests (5 s each unknown), e.py::broken out
    assert sel.why.endswith("and the 3 tests newer than the map")
    select.first_pass = True  # the new tests in the files that hold the map's tests for the line, alone
    assert select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line, 4, line, 5)).tests == ["a.py::new"]


def test_a_reported_survivor_is_found_by_its_line_text_and_mutation_nearest_where_it_was(tool: dict[str, Any]) -> None:
    """By file, operator, line text and column, as equivalent.toml matches; by the mutated line too (NumberReplacer
    makes x - 2 and x - 0 at one place); of a line repeated in the file, the copy nearest the reported line."""
    mutant = tool["Mutant"]
    here = [mutant("1", "m.py", "op", 0, 219, 30, 219, 31), mutant("2", "m.py", "op", 2, 915, 30, 915, 31),
            mutant("2b", "m.py", "op", 3, 915, 30, 915, 31), mutant("3", "m.py", "other", 0, 915, 30, 915, 31)]
    keys = {"1": ("m.py", "op", "x - 1", 12), "2": ("m.py", "op", "x - 1", 12), "2b": ("m.py", "op", "x - 1", 12),
            "3": ("m.py", "other", "x - 1", 12)}
    mutated = {"1": "x - 2", "2": "x - 2", "2b": "x - 0", "3": "x + 1"}

    def find(row: dict[str, Any]) -> str | None:
        m = tool["locate"](row, here, lambda m: keys[m.job_id], lambda m: mutated[m.job_id])
        return None if m is None else m.job_id

    row = {"file": "m.py", "operator": "op", "code": "x - 1", "column": 12, "line": 811,
           "diff": "--- a/m.py\n+++ b/m.py\n@@ -811 +811 @@\n-    x - 1\n+    x - 0\n"}
    assert find(row) == "2b"                            # the reported mutation, on the copy 104 lines away
    assert find({**row, "diff": row["diff"].replace("x - 0", "x - 2")}) == "2"  # not the copy 592 away
    assert find({**row, "column": 13}) is None           # gone


def test_rejudged_verdicts_move_the_counts_and_rescore(tool: dict[str, Any]) -> None:
    def counts(**kw: int) -> dict[str, Any]:
        return {**dict.fromkeys(("mutants", "unevaluated", "pending", "killed", "timeout", "survived", "equivalent",
                                 "not_executed", "error"), 0), **kw, "score": None}

    rows = [{"file": "p/a.py", "wing": "p", "core": True, "category": "survived", "note": "no test executes this line",
             "line": 5, "tests": 0},
            {"file": "p/a.py", "wing": "p", "core": True, "category": "survived", "note": "x", "line": 9, "tests": 3},
            {"file": "p/a.py", "wing": "p", "core": True, "category": "survived", "note": "x", "line": 12, "tests": 3},
            {"file": "p/a.py", "wing": "p", "core": True, "category": "survived", "note": "x", "line": 20, "tests": 3}]
    report = {"totals": {"package": counts(mutants=10, killed=6, survived=4, not_executed=1),
                         "core": counts(mutants=10, killed=6, survived=4, not_executed=1)},
              "wings": {"p": counts(mutants=10, killed=6, survived=4, not_executed=1)},
              "modules": {"p/a.py": counts(mutants=10, killed=6, survived=4, not_executed=1)},
              "survivors": list(rows)}
    verdicts = [{"row": rows[0], "verdict": "killed", "line": 6, "tests": 2, "seconds": 1.0, "note": "x"},
                {"row": rows[1], "verdict": "equivalent", "line": 9, "tests": 0, "seconds": 0.0, "note": "toml",
                 "reason": "why"},
                {"row": rows[2], "verdict": "gone", "line": None, "tests": 0, "seconds": 0.0, "note": ""},
                {"row": rows[3], "verdict": "survived", "line": 21, "tests": 5, "seconds": 9.0, "note": "x"}]
    tool["apply_verdicts"](report, verdicts)
    for c in (report["totals"]["package"], report["totals"]["core"], report["wings"]["p"], report["modules"]["p/a.py"]):
        assert (c["mutants"], c["killed"], c["survived"], c["equivalent"], c["not_executed"]) == (9, 7, 1, 1, 0)
        assert c["score"] == round(7 / 8, 4)
    assert [(r["line"], r["category"]) for r in report["survivors"]] == [(9, "equivalent"), (21, "survived")]
    assert report["survivors"][0]["reason"] == "why" and report["survivors"][1]["tests"] == 5


def test_a_module_moved_since_the_map_is_followed_by_gits_rename_detection(tool: dict[str, Any]) -> None:
    """A survivor (and the map's functions) of a module renamed since the map is looked for under the new name."""
    status = ("M\tnczarr_conformance/keys.py\n"
              "R087\tnczarr_conformance/concat.py\tnczarr_conformance/conversion/concat.py"
              "\nD\tnczarr_conformance/gone.py\nR100\tnczarr_conformance/api.py\tnczarr_conformance/access/api.py\n")
    assert tool["renames"](status) == {"nczarr_conformance/concat.py": "nczarr_conformance/conversion/concat.py",
                                       "nczarr_conformance/api.py": "nczarr_conformance/access/api.py"}
