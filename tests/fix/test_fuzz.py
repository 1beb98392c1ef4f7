"""Hypothesis mutates a netcdf-c 4.10.1 store; nczarr-fix either fixes it or refuses in one line (an NczarrError,
exit 2), never crashes, and a store it fixed is one our reader opens whenever it opened the original."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import NczarrError
from nczarr_conformance.fix import fix_store
from nczarr_conformance.fix.registry import FIXES
from tests.check.test_fuzz import JSON_VALUES, apply
from tests.fix.helpers import c410

pytestmark = pytest.mark.peer


def _template() -> Path:
    path = Path(tempfile.mkdtemp(prefix="ncz-fix-fuzz-")) / "t.file"
    return c410(path, byte=True, shuffle=True, char=True, string=True, partial_double=True, answer=True, group=True)


TEMPLATE = _template()
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
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


def _one_case(mutations, outcomes: list[tuple[str, str]]) -> None:
    """Mutate a copy of the template, fix it into ``fixed.file``; record ("fixed", fix ids), ("nothing", "") or
    ("refused", message)."""
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
            result = fix_store(str(store), out=str(work / "fixed.file"))
        except NczarrError as exc:
            message = str(exc).strip()
            # a named reason: one line naming the object(s) at fault ("/i/0: cannot re-encode…", "no dataset here:
            # none of /.zgroup, /.zarray (Zarr v2) or /zarr.json (Zarr v3) exists") and the cause after a colon;
            # and nothing written
            assert "\n" not in message and re.search(r"(^|\s)/\S", message) and re.search(r": \S", message), message
            assert not (work / "fixed.file").exists()
            outcomes.append(("refused", message.removeprefix(str(store))))
            return
        applied = sorted({change.fix for change in result.plan.changes})
        assert set(applied) <= set(FIXES), applied
        outcomes.append(("fixed", " ".join(applied)) if applied else ("nothing", ""))
        if opened:
            open_dataset(str(work / "fixed.file"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_fix_never_crashes():
    """Every mutated store is fixed or refused with a named reason; and the run is not all refusals: a fix that
    refused every store (or a template every mutation breaks beyond repair) would pass the first part alone."""
    outcomes: list[tuple[str, str]] = []

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutations=st.lists(mutation, min_size=1, max_size=3))
    def run(mutations):
        _one_case(mutations, outcomes)

    run()
    kinds = Counter(kind for kind, _ in outcomes)
    assert kinds["fixed"] >= EXAMPLES // 10, f"too few stores fixed: {kinds} (refusals: {outcomes[:5]})"
    assert kinds["refused"] >= 1, f"no mutation was refused, so the refusal path went untested: {kinds}"
