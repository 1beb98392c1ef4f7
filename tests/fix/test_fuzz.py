"""Hypothesis mutates a netcdf-c 4.10.1 store; nczarr-fix either fixes it or refuses in one line (an NczarrError,
exit 2), never crashes, and a store it fixed is one our reader opens whenever it opened the original."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nczarr_conformance.dataset import open_dataset
from nczarr_conformance.errors import NczarrError
from nczarr_conformance.fix import fix_store
from tests.check.test_fuzz import JSON_VALUES, apply
from tests.fix.helpers import c410

pytestmark = pytest.mark.peer


def _template() -> Path:
    path = Path(tempfile.mkdtemp(prefix="ncz-fix-fuzz-")) / "t.file"
    return c410(path, byte=True, shuffle=True, char=True, string=True, partial_double=True, answer=True, group=True)


TEMPLATE = _template()
OBJECTS = sorted(p.relative_to(TEMPLATE).as_posix() for p in TEMPLATE.rglob("*") if p.is_file())
METADATA = [o for o in OBJECTS if o.rsplit("/", 1)[-1].startswith(".z")]
mutation = st.one_of(  # as tests/check/test_fuzz.py, over this store's objects (metadata twice as often)
    st.tuples(st.just("truncate"), st.sampled_from(OBJECTS), st.integers(0, 200)),
    st.tuples(st.just("flip"), st.sampled_from(OBJECTS), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("drop"), st.sampled_from(OBJECTS)),
    # the chunks NCZ-FIX-NO-FILTERS decodes and re-encodes (zlib + shuffle)
    st.tuples(st.just("flip"), st.sampled_from(["i/0", "i/1"]), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("json"), st.sampled_from(METADATA), st.lists(st.integers(0, 50), max_size=4), JSON_VALUES),
    st.tuples(st.just("json"), st.sampled_from(METADATA), st.lists(st.integers(0, 50), max_size=4), JSON_VALUES),
)


@settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(mutation, min_size=1, max_size=3))
def test_fix_never_crashes(mutations):
    work = Path(tempfile.mkdtemp(prefix="ncz-fix-case-"))
    try:
        store = work / "t.file"
        shutil.copytree(TEMPLATE, store)
        for m in mutations:
            apply(store, m)
        try:
            opened = open_dataset(str(store)) is not None
        except NczarrError:
            opened = False
        try:
            fix_store(str(store), out=str(work / "fixed.file"))
        except NczarrError as exc:
            assert str(exc).strip() and "\n" not in str(exc).strip()
            assert not (work / "fixed.file").exists()
            return
        if opened:
            open_dataset(str(work / "fixed.file"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
