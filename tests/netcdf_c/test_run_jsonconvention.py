"""Port of netcdf-c ``nczarr_test/run_jsonconvention.sh``: JSON-valued attributes, written and read.

The script builds ``ref_jsonconvention.cdl`` into ``mode=nczarr,file``, compares ``ncdump`` with the
source (``diff -b``) and the store's ``zmapio -h`` listing with ``ref_jsonconvention.zmap`` after two
``sed`` lines: ``"_NCProperties": "version=…",`` removed and metadata lengths ``(N)`` blanked. The
listing is compared here object by object: the same keys, each JSON metadata object equal as JSON
(key order is not part of a listing's meaning), a non-JSON object (netcdf-c's ``[0.,0.,1.]``) equal
as text, chunks equal in length.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    READERS,
    WRITERS,
    Step,
    build,
    load_known,
    require,
    run_step,
    settle,
)

KNOWN = load_known("run_jsonconvention")
STEP = Step("nczarr_test/ref_jsonconvention.cdl", "nczarr_test/ref_jsonconvention.cdl", "tmp_jsonconvention",
            "nczarr", "nczarr")
LINE = re.compile(r"\[\d+\] (\S+) : \((\d*)\) (?:\(\w+\) )?\|(.*)\|")


def zmap_objects(text: str) -> dict[str, str]:
    """key → content of a zmapio listing (chunks: their length)."""
    out = {}
    for line in text.splitlines():
        m = LINE.fullmatch(line)
        assert m, f"not a zmapio line: {line!r}"
        key, length, content = m.groups()
        out[key] = f"<{length} bytes>" if content == "..." else content
    return out


def store_objects(store: Path) -> dict[str, str]:
    """The same view of a directory store."""
    out = {}
    for path in sorted(p for p in store.rglob("*") if p.is_file()):
        key = "/" + path.relative_to(store).as_posix()
        raw = path.read_bytes()
        if path.name.startswith(".z"):
            out[key] = raw.decode("utf-8", "surrogateescape")
        else:
            out[key] = f"<{len(raw)} bytes>"
    return out


def as_json_or_text(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def object_diff(expected: dict[str, str], got: dict[str, str]) -> list[str]:
    out = [f"{k}: only in baseline" for k in sorted(set(expected) - set(got))]
    out += [f"{k}: only in store" for k in sorted(set(got) - set(expected))]
    for k in sorted(set(expected) & set(got)):
        a, b = as_json_or_text(expected[k]), as_json_or_text(got[k])
        if isinstance(b, dict):
            b.pop("_NCProperties", None)  # the sed, on the JSON form (any key order)
        if a != b:
            out.append(f"{k}: {expected[k]} != {got[k]}")
    return out


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_jsonconvention_dump(writer, reader, stores, request):
    """run_jsonconvention.sh: ``ncdump`` of the built store equals ref_jsonconvention.cdl (diff -b)."""
    run_step(request, stores, "run_jsonconvention", "dump", STEP, writer, reader, KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("writer", WRITERS)
def test_jsonconvention_zmap(writer, stores, request):
    """run_jsonconvention.sh: the built store holds ref_jsonconvention.zmap's objects, one by one."""
    cdl = require(NCZARR_TEST / "ref_jsonconvention.cdl")
    expected = zmap_objects(require(NCZARR_TEST / "ref_jsonconvention.zmap").read_text())
    store, failed = stores.get(f"run_jsonconvention-dump-{writer}",
                               lambda tmp: build(writer, cdl, tmp, "nczarr", name=STEP.name))
    settle(request, lambda: failed if failed is not None else (object_diff(expected, store_objects(store)) or PASS),
           KNOWN)
