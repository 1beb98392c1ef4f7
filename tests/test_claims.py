"""docs/claims.md: every "same", "never", "always" or "equal" of README.md, the pages under docs/ and the
public docstrings is listed with the test that fails when it stops being true, and each listed test exists.

The list is parsed, not collected: a test id is a file of tests/ and a function (or Class::method) defined in
it by name (parametrized ids name their function). A sentence added with one of the four words, a quoted phrase
reworded away, or a listed test renamed or deleted fails here.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

CLAIMS = REPO / "docs" / "claims.md"
#: the words that make a statement a claim to hold
WORDS = re.compile(r"\bsame\b|\bnever\b|\balways\b|\bequal", re.IGNORECASE)
TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)(\[[^\]]*\])?`")


@functools.cache
def _sections() -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """(files of a section) → [(quoted phrase, what holds it)], as docs/claims.md lists them."""
    sections: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    files: tuple[str, ...] = ()
    for line in CLAIMS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            files = tuple(f.strip() for f in line[3:].split(","))
            sections[files] = []
        elif files and line.startswith("| `"):  # a row (the header row starts "| claim")
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            assert len(cells) == 2, line
            phrase = re.fullmatch(r"``(.+?)``|`([^`]+)`", cells[0])  # ``…`` when the words hold a backtick
            assert phrase, f"the first cell quotes the source's words in one code span: {line}"
            sections[files].append((phrase.group(1) or phrase.group(2), cells[1]))
    return sections


def _docstring_lines(path: Path) -> list[str]:
    """The lines of the module's docstring and of every public class and function's."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and not n.name.startswith("_")]
    return [line.strip() for n in nodes for line in (ast.get_docstring(n) or "").splitlines()]


@functools.cache
def _claim_lines(rel: str) -> list[str]:
    path = REPO / rel
    lines = _docstring_lines(path) if path.suffix == ".py" else path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if WORDS.search(line)]


def _sources() -> list[str]:
    """README.md, every page of docs/ (claims.md quotes the others) and the package's modules that hold a claim."""
    pages = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md") if p != CLAIMS)
    package = sorted(str(p.relative_to(REPO)) for p in (REPO / "nczarr_conformance").rglob("*.py"))
    return ["README.md", *pages, *[p for p in package if _claim_lines(p)]]


def test_every_claim_of_the_sources_is_listed():
    """Each line of README.md, a docs/ page or a public docstring holding one of the words holds a phrase
    docs/claims.md lists for that file."""
    listed: dict[str, list[str]] = {}
    for files, rows in _sections().items():
        for f in files:
            listed.setdefault(f, []).extend(phrase for phrase, _ in rows)
    unlisted = [f"{rel}: {line}" for rel in _sources() for line in _claim_lines(rel)
                if not any(phrase in line for phrase in listed.get(rel, []))]
    assert unlisted == [], "add these to docs/claims.md with the test that holds each:\n" + "\n".join(unlisted)


def test_every_listed_phrase_is_in_its_source():
    missing = [f"{files}: {phrase!r}" for files, rows in _sections().items() for phrase, _ in rows
               if not any(phrase in line for f in files for line in _claim_lines(f))]
    assert missing == []


def test_every_claim_names_a_test_or_says_why_it_is_none():
    bare = [phrase for rows in _sections().values() for phrase, held in rows
            if not TEST_ID.search(held) and not held.startswith("no claim")]
    assert bare == []


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{m.name}" for m in node.body if isinstance(m, ast.FunctionDef)}
    return names


def test_every_listed_test_exists():
    ids = {(m.group(1), m.group(2)) for rows in _sections().values() for _, held in rows
           for m in TEST_ID.finditer(held)}
    assert len(ids) > 100
    gone = sorted(f"{f}::{name}" for f, name in ids
                  if not (REPO / f).is_file() or name not in _defined(REPO / f) or not name.split("::")[-1]
                  .startswith("test_"))
    assert gone == []


@pytest.mark.parametrize("module", ["nczarr_conformance/conformance/cases.py", "nczarr_conformance/testing/source.py"])
def test_source_truth_and_cases_import_no_reader_or_writer_of_ours(module):
    """The matrix's intended models (cases.py: "never derived from any implementation") and the source truth
    of a .nc file (testing/source.py: "never by the converter's adapter") import only the model and the
    packaged data from this package (cases.py also our CDL parser, for netcdf-c's own baselines: its parse is held
    to netCDF4-python's reading of ncgen's file by tests/test_cdl_parse.py), so no reader, writer or peer adapter
    of ours can shape them."""
    tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
    ours = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level > 0}
    ours |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
             if a.name.startswith("nczarr_conformance")}
    assert ours <= {"model", "resources", "cdl_parse"}, ours
