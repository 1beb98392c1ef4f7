"""Port of netcdf-c ``nczarr_test/run_nulls.sh``: special cases of NC_CHAR attributes (NUL, empty, "0").

``ref_nulls.cdl`` is written with ``mode=zarr`` and ``mode=nczarr``, dumped with ``ncdump -n
ref_nulls`` and compared (``diff -bw``) with ``ref_nulls_zarr.baseline`` and
``ref_nulls_nczarr.baseline``.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, WRITERS, Step, load_known, run_step

KNOWN = load_known("run_nulls")
STEPS = {
    "zarr": Step("nczarr_test/ref_nulls.cdl", "nczarr_test/ref_nulls_zarr.baseline", "tmp_nulls_zarr", "zarr",
                 "zarr", ("-n", "ref_nulls"), ws="w"),
    "nczarr": Step("nczarr_test/ref_nulls.cdl", "nczarr_test/ref_nulls_nczarr.baseline", "tmp_nulls_nczarr",
                   "nczarr", "nczarr", ("-n", "ref_nulls"), ws="w"),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_nulls(step, writer, reader, stores, request):
    """run_nulls.sh testcase(file): ``writer`` writes ref_nulls.cdl, ``reader``'s dump equals the baseline."""
    run_step(request, stores, "run_nulls", step, STEPS[step], writer, reader, KNOWN)
