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

    assert chosen(5) == (["f1.py::b"], "tests executing the line")
    assert chosen(9) == (["f2.py::c"], "tests executing the line")        # a test failing unmutated is left out
    # quickest file first, a file's tests together (module fixtures are set up once) in node-id order
    assert chosen(1) == (["f2.py::c", "f1.py::a", "f1.py::b"], "the line runs at import only: every test of the module")
    assert chosen(3) == ([], "no test executes this line")


def test_function_map_selection_survives_moved_lines(tool: dict[str, Any], tmp_path: Path) -> None:
    doc = {"recorded_for": "x", "tests": ["tests/mutation/test_script.py::t1"], "times": [1.0],
           "functions": {"nczarr_conformance/keys.py": {"join": [0]}}}
    select = tool["FunctionSelector"](doc, [])
    source = (SCRIPT.parents[1] / "nczarr_conformance" / "keys.py").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.startswith("def join("))
    sel = select(tool["Mutant"]("j", "nczarr_conformance/keys.py", "op", 0, line + 1, 4, line + 1, 5))
    assert sel.tests == ["tests/mutation/test_script.py::t1"]
