"""Port of netcdf-c ``nczarr_test/run_mud.sh`` (generated from ``ncdump/tst_mud.sh`` with TESTNCZARR=1).

Multiple unlimited dimensions: ``ncdump/ref_tst_mud4.cdl`` built with ``ncgen -4 -b`` into
``mode=nczarr,file`` and dumped with ``ncdump -n tst_mud4`` equals the source (``diff -b``);
``ncdump -n tst_mud4 -bc`` equals ``ref_tst_mud4-bc.cdl`` (ncdump only: nczarr-dump has no ``-b``
and netCDF4-python no CDL); ``ref_tst_mud4_chars.cdl`` likewise with ``-n tst_mud4_chars``.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, WRITERS, Step, load_known, run_step

KNOWN = load_known("run_mud")
STEPS = {
    "mud4": Step("ncdump/ref_tst_mud4.cdl", "ncdump/ref_tst_mud4.cdl", "tmp_mud4_file", "nczarr", "nczarr",
                 ("-n", "tst_mud4")),
    "mud4-bc": Step("ncdump/ref_tst_mud4.cdl", "ncdump/ref_tst_mud4-bc.cdl", "tmp_mud4_file", "nczarr", "nczarr",
                    ("-n", "tst_mud4", "-bc")),
    "mud4_chars": Step("ncdump/ref_tst_mud4_chars.cdl", "ncdump/ref_tst_mud4_chars.cdl", "tmp_mud4_charsfile",
                       "nczarr", "nczarr", ("-n", "tst_mud4_chars")),
}
CELLS = [(s, w, r) for s in STEPS for w in WRITERS for r in READERS if s != "mud4-bc" or r == "ncdump-4.9.0"]


@pytest.mark.peer
@pytest.mark.parametrize(("step", "writer", "reader"), CELLS)
def test_mud(step, writer, reader, stores, request):
    """run_mud.sh testcase(file): ``writer`` writes the CDL, ``reader``'s dump equals the baseline."""
    run_step(request, stores, "run_mud", step.removesuffix("-bc"), STEPS[step], writer, reader, KNOWN)
