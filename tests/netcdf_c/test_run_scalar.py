"""Port of netcdf-c ``nczarr_test/run_scalar.sh``: a scalar variable in pure Zarr and in NCZarr.

``ref_scalar.cdl`` is written with ``mode=zarr`` and ``mode=nczarr``, dumped with ``ncdump -n
ref_scalar`` and compared (``diff -bw``) with ``ref_scalar.cdl`` and ``ref_scalar_nczarr.cdl``.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, WRITERS, Step, load_known, run_step

KNOWN = load_known("run_scalar")
STEPS = {
    "zarr": Step("nczarr_test/ref_scalar.cdl", "nczarr_test/ref_scalar.cdl", "tmp_scalar_zarr", "zarr", "zarr",
                 ("-n", "ref_scalar"), ws="w"),
    "nczarr": Step("nczarr_test/ref_scalar.cdl", "nczarr_test/ref_scalar_nczarr.cdl", "tmp_scalar_nczarr", "nczarr",
                   "nczarr", ("-n", "ref_scalar"), ws="w"),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_scalar(step, writer, reader, stores, request):
    """run_scalar.sh testcase(file): ``writer`` writes ref_scalar.cdl, ``reader``'s dump equals the baseline."""
    run_step(request, stores, "run_scalar", step, STEPS[step], writer, reader, KNOWN)
