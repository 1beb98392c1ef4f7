"""Port of netcdf-c ``nczarr_test/run_ncgen4.sh``: ncgen → NCZarr → ncdump against ``ncdump/expected``.

The script builds ``ncdump/cdl/ref_<t>.cdl`` with ``ncgen -4 -lb`` into ``file://…#mode=nczarr,file``,
dumps it with ``ncdump -n ref_<t>``, deletes every ``:_FillValue`` line (``fvclean``, except for
``tst_nans``) and compares with ``ncdump/expected/ref_<t>.dmp`` by ``diff -b -w``. Each cell
does that with one writer and one reader (tests/netcdf_c/harness.py); the normalisation is the
script's, nothing more.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import (
    NCDUMP_DIR,
    READERS,
    WRITERS,
    build,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    settle,
)

#: run_ncgen4.sh TESTS and FVTESTS
TESTS = ("dimscope", "tst_group_data", "tst_solar_1", "tst_nul4")
FVTESTS = ("tst_nans",)
KNOWN = load_known("run_ncgen4")


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("t", TESTS + FVTESTS)
def test_ncgen4(t, writer, reader, stores, request):
    """ncdump/cdl/ref_<t>.cdl written by ``writer``, read by ``reader``, equals ncdump/expected/ref_<t>.dmp."""
    cdl = require(NCDUMP_DIR / "cdl" / f"ref_{t}.cdl")
    expected = read_text(require(NCDUMP_DIR / "expected" / f"ref_{t}.dmp"))
    store, failed = stores.get(f"ncgen4-{t}-{writer}",
                               lambda tmp: build(writer, cdl, tmp, "nczarr", ncgen_flags=("-4", "-lb")))
    drop = () if t in FVTESTS else (r":_FillValue",)

    def outcome():
        if failed is not None:
            return failed
        return read_outcome(reader, expected, nc_url(store, "nczarr,file"), ("-n", f"ref_{t}"), ws="w", drop=drop,
                            drop_attrs=("_FillValue",) if drop else ())

    settle(request, outcome, KNOWN)
