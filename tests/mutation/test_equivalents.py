"""tests/mutation/equivalent.toml: every entry is reasoned, unique and still names a real mutant."""
from __future__ import annotations

import pytest

from tests.mutation.equivalents import FILE, EquivalentError, find, load, parse

REPO = FILE.parents[2]

ENTRY = '''
[[equivalent]]
file = "nczarr_conformance/cli/check.py"
operator = "core/ReplaceComparisonOperator_Eq_LtE"
code = "if len(args.urls) == 1:"
column = 16
reason = "check_all runs only with at least one URL, so == 1 and <= 1 agree"
'''


def test_an_entry_is_keyed_by_file_operator_and_line_text() -> None:
    entries = parse(ENTRY)
    assert list(entries) == [("nczarr_conformance/cli/check.py", "core/ReplaceComparisonOperator_Eq_LtE",
                              "if len(args.urls) == 1:", 16, "")]


NUMBER = ENTRY.replace("core/ReplaceComparisonOperator_Eq_LtE", "core/NumberReplacer").replace("column = 16",
                                                                                                 "column = 19")


def test_a_mutation_names_one_of_the_mutants_an_operator_makes_at_one_place() -> None:
    """NumberReplacer turns the 1 into 2 and into 0: an entry naming the mutated line covers that one only; an entry
    without covers both."""
    place = ("nczarr_conformance/cli/check.py", "core/NumberReplacer", "if len(args.urls) == 1:", 19)
    one = parse(NUMBER + 'mutation = "if len(args.urls) ==  2:"\n')
    assert find(one, place, "  if len(args.urls) ==  2:") is not None
    assert find(one, place, "if len(args.urls) ==  0:") is None
    both = parse(NUMBER)
    assert find(both, place, "if len(args.urls) ==  0:") is find(both, place, "if len(args.urls) ==  2:") is not None
    assert len(parse(NUMBER + 'mutation = "a"\n' + NUMBER + 'mutation = "b"\n')) == 2


def test_an_entry_for_every_mutant_of_a_place_beside_one_for_a_single_mutant_is_refused() -> None:
    with pytest.raises(EquivalentError, match="entry 2 repeats the mutant of an earlier entry"):
        parse(NUMBER + NUMBER + 'mutation = "if len(args.urls) ==  2:"\n')


def test_two_places_on_one_line_are_two_mutants() -> None:
    assert len(parse(ENTRY + ENTRY.replace("column = 16", "column = 3"))) == 2


def test_a_repeated_mutant_is_refused_naming_the_entry() -> None:
    with pytest.raises(EquivalentError, match="entry 2 repeats the mutant of an earlier entry"):
        parse(ENTRY + ENTRY.replace("so == 1", "hence == 1"))


@pytest.mark.parametrize("reason", ["", "   ", "equivalent"])
def test_an_entry_without_a_reason_is_refused(reason: str) -> None:
    with pytest.raises(EquivalentError, match=r"entry 1: .*reason"):
        parse(ENTRY.replace('reason = "check_all runs only with at least one URL, so == 1 and <= 1 agree"',
                            f"reason = {reason!r}"))


def test_a_missing_reason_field_is_refused() -> None:
    with pytest.raises(EquivalentError, match=r"missing \['reason'\]"):
        parse("\n".join(line for line in ENTRY.splitlines() if not line.startswith("reason")))


@pytest.mark.parametrize("column", ["-1", '"16"', "true"])
def test_a_column_that_is_not_a_non_negative_integer_is_refused(column: str) -> None:
    with pytest.raises(EquivalentError, match="'column' must be a non-negative integer"):
        parse(ENTRY.replace("column = 16", f"column = {column}"))


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(EquivalentError, match=r"unknown \['line'\]"):
        parse(ENTRY + "line = 97\n")


def test_the_repository_list_loads_and_each_entry_names_a_line_and_operator_that_exist() -> None:
    from cosmic_ray.plugins import operator_names

    operators = set(operator_names())
    for entry in load().values():
        source = (REPO / entry.file).read_text(encoding="utf-8").splitlines()
        assert entry.code in (line.strip() for line in source), f"{entry.file}: no line {entry.code!r}"
        assert entry.column < len(entry.code), (entry.file, entry.code, entry.column)
        assert entry.operator in operators, entry.operator
        if entry.mutation:
            assert entry.mutation in _mutations_at(entry), (entry.file, entry.code, entry.mutation)


def _mutations_at(entry) -> set[str]:  # type: ignore[no-untyped-def]
    """The mutated lines cosmic-ray makes with the entry's operator at its place."""
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    text = (REPO / entry.file).read_text(encoding="utf-8")
    lines = text.splitlines()
    at = [n for n, line in enumerate(lines, 1) if line.strip() == entry.code]
    operator = get_operator(entry.operator)()
    found = set()
    occurrence = 0
    for node in ast_nodes(get_ast(text)):
        for start, _ in operator.mutation_positions(node):
            line = lines[start[0] - 1]
            if start[0] in at and start[1] - (len(line) - len(line.lstrip())) == entry.column:
                found.add(mutate_code(text, operator, occurrence).splitlines()[start[0] - 1].strip())
            occurrence += 1
    return found
