"""Hypothesis mutates valid stores; the checker always answers 0 or 1 with a schema-valid report."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from nczarr_conformance.checker import check
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.testing.samples import small_model
from tests.check.test_check import REPORT_SCHEMA

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=5),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                           max_leaves=6)


def _template() -> Path:
    path = Path(tempfile.mkdtemp(prefix="ncz-fuzz-")) / "t.file"
    with DirectoryStore(path, "w") as store:
        write_dataset(small_model(), store)
    return path


TEMPLATE = _template()
OBJECTS = sorted(p.relative_to(TEMPLATE).as_posix() for p in TEMPLATE.rglob("*") if p.is_file())


def _replace_json(doc, path: list, value):
    """Replace the member at ``path`` (a list of keys/indexes, wrapped) inside doc."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    if isinstance(doc, dict):
        key = sorted(doc)[path[0] % len(doc)]
        doc[key] = _replace_json(doc[key], path[1:], value)
    else:
        i = path[0] % len(doc)
        doc[i] = _replace_json(doc[i], path[1:], value)
    return doc


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.sampled_from(OBJECTS), st.integers(0, 200)),
    st.tuples(st.just("flip"), st.sampled_from(OBJECTS), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("drop"), st.sampled_from(OBJECTS)),
    st.tuples(st.just("json"), st.sampled_from([o for o in OBJECTS if o.rsplit("/", 1)[-1].startswith(".z")]),
              st.lists(st.integers(0, 50), max_size=4), JSON_VALUES),
)


def apply(path: Path, m: tuple) -> None:
    target = path / m[1]
    if not target.exists():
        return
    if m[0] == "truncate":
        target.write_bytes(target.read_bytes()[: m[2]])
    elif m[0] == "flip":
        data = bytearray(target.read_bytes())
        if data:
            data[m[2] % len(data)] ^= m[3]
            target.write_bytes(bytes(data))
    elif m[0] == "drop":
        target.unlink()
    else:
        try:
            doc = json.loads(target.read_text())
        except ValueError:
            return
        target.write_text(json.dumps(_replace_json(doc, list(m[2]), m[3])))


@settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", "60")))
@given(st.lists(mutation, min_size=1, max_size=4))
def test_mutated_store_gives_a_valid_report(mutations):
    work = Path(tempfile.mkdtemp(prefix="ncz-fuzz-"))
    try:
        path = work / "t.file"
        shutil.copytree(TEMPLATE, path)
        for m in mutations:
            apply(path, m)
        report = check(str(path), deep=True)
        doc = report.to_json()
        assert report.exit_code == (1 if doc["summary"]["errors"] else 0), report.to_text()
        jsonschema.validate(report.to_json(), REPORT_SCHEMA)
        assert not [f for f in report.findings if f.rule == "NCZ-CHECK-CRASH"], report.to_text()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_cli_on_a_heavily_mutated_store_never_tracebacks(tmp_path):
    path = tmp_path / "t.file"
    shutil.copytree(TEMPLATE, path)
    for i, name in enumerate(OBJECTS):
        apply(path, ("flip", name, i * 7, 0x5A))
    for fmt in ("text", "json"):
        result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--deep", "--format", fmt,
                                 str(path)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr  # every object is corrupt
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert doc["summary"]["errors"] > 0
