"""Loader of tests/mutation/equivalent.toml: the mutants that cannot change what a user sees.

``scripts/mutation`` counts a survivor listed here as equivalent, not as a gap in the tests, and
its CI mode fails only on survivors that are not listed. An entry names the mutant by what stays
stable across edits (file, cosmic-ray operator, the original source line's text) rather than by a
line number, so it keeps matching when code above it moves; ``column`` (where the mutation starts,
counted from the line's first non-blank character) tells apart two places on one line that the
same operator mutates, such as the two ``<`` of ``0 < n < 100``. An operator can also make several
mutants at one place (NumberReplacer turns ``1`` into ``2`` and into ``0``): ``mutation``, the mutated
line's text, then names the one the entry is for; without it an entry covers every mutant of its
place, so its reason must hold for each. Every entry must give a reason (the argument why no input
can tell the mutant from the original), and two entries for one mutant are refused: a list whose
entries can silently shadow each other cannot be reviewed.

    [[equivalent]]
    file = "nczarr_conformance/cli/check.py"
    operator = "core/ReplaceComparisonOperator_Eq_LtE"
    code = "if len(args.urls) == 1:"
    column = 16
    reason = "check_all runs only with at least one URL (main refuses none), so len == 1 and len <= 1 agree"

    [[equivalent]]
    file = "nczarr_conformance/conversion/append.py"
    operator = "core/NumberReplacer"
    code = "rows = max(1, STRING_SLAB // max(1, math.prod(shape[1:])))"
    column = 11
    mutation = "rows = max( 2, STRING_SLAB // max(1, math.prod(shape[1:])))"
    reason = "1 → 2 rows per slab: every row is still checked, in order, with the same messages"
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

FILE = Path(__file__).with_name("equivalent.toml")
FIELDS = frozenset({"file", "operator", "code", "column", "reason"})
OPTIONAL = frozenset({"mutation"})
#: what an entry is found by: file, operator, the original line's text, the column in it, and the mutated
#: line's text ("" when the entry covers every mutant of that place)
Key = tuple[str, str, str, int, str]


class EquivalentError(ValueError):
    """equivalent.toml is malformed: the message names the entry and what is wrong."""


@dataclass(frozen=True)
class Equivalent:
    """One mutant declared equivalent; ``key`` is what a mutant is matched on."""

    file: str
    operator: str
    code: str
    column: int
    reason: str
    mutation: str = ""

    @property
    def key(self) -> Key:
        return (self.file, self.operator, self.code, self.column, self.mutation)


def find(entries: dict[Key, Equivalent], place: tuple[str, str, str, int], mutated: str) -> Equivalent | None:
    """The entry for the mutant at ``place`` (file, operator, line text, column) whose mutated line reads
    ``mutated``: the entry naming that mutation, else the one covering every mutant of the place."""
    return entries.get((*place, mutated.strip())) or entries.get((*place, ""))


def parse(text: str, where: str = "equivalent.toml") -> dict[Key, Equivalent]:
    """Entries of an equivalent.toml text by key; EquivalentError on anything a reviewer could misread."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EquivalentError(f"{where}: not TOML: {exc}") from exc
    unknown = set(doc) - {"equivalent"}
    if unknown:
        raise EquivalentError(f"{where}: unknown top-level keys {sorted(unknown)} (only [[equivalent]] tables)")
    entries = doc.get("equivalent", [])
    if not isinstance(entries, list):
        raise EquivalentError(f"{where}: 'equivalent' must be an array of tables ([[equivalent]])")
    found: dict[Key, Equivalent] = {}
    for number, entry in enumerate(entries, 1):
        item = _entry(entry, f"{where}: entry {number}")
        # the same place twice: the same mutation, or one entry covering every mutant beside one naming it
        if any(k[:4] == item.key[:4] and (k[4] == item.mutation or "" in (k[4], item.mutation)) for k in found):
            raise EquivalentError(f"{where}: entry {number} repeats the mutant of an earlier entry: "
                                  f"{item.file} {item.operator} {item.code!r} column {item.column}")
        found[item.key] = item
    return found


def _entry(entry: object, where: str) -> Equivalent:
    if not isinstance(entry, dict):
        raise EquivalentError(f"{where}: not a table")
    missing = sorted(FIELDS - set(entry))
    extra = sorted(set(entry) - FIELDS - OPTIONAL)
    if missing or extra:
        raise EquivalentError(f"{where}: missing {missing} / unknown {extra}; fields are {sorted(FIELDS)}, "
                              f"optional {sorted(OPTIONAL)}")
    column = entry["column"]
    if not isinstance(column, int) or isinstance(column, bool) or column < 0:
        raise EquivalentError(f"{where}: 'column' must be a non-negative integer")
    values = {name: entry[name] for name in (FIELDS | OPTIONAL) - {"column"} if name in entry}
    for name, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise EquivalentError(f"{where}: {name!r} must be a non-empty string")
    if len(values["reason"].split()) < 4:
        raise EquivalentError(f"{where}: the reason must say why no input tells the mutant apart, "
                              f"not {values['reason']!r}")
    return Equivalent(file=values["file"], operator=values["operator"], code=values["code"].strip(),
                      column=column, reason=values["reason"].strip(), mutation=values.get("mutation", "").strip())


def load(path: Path = FILE) -> dict[Key, Equivalent]:
    """The entries of ``path`` (the repository's equivalent.toml by default)."""
    return parse(path.read_text(encoding="utf-8"), str(path))
