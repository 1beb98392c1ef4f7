"""Port of netcdf-c ``nczarr_test/run_xarray_misc.sh``: where xarray and anonymous dimensions are created.

``testanonlocation`` (the one the script runs): ``ref_xarrayanon.cdl`` written with
``mode=zarr,noxarray`` and dumped equals itself (``diff -b``): anonymous dimensions in the root.
``testdimlocation`` (commented out in the script, whose ``diff`` names the wrong file): ``ref_xarraygroup.cdl``
written with ``mode=xarray``: a sub-group's ``_ARRAY_DIMENSIONS`` name dimensions local to that group
(netcdf-c PR #3218); ported because the behaviour is netcdf-c's current one.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, WRITERS, Step, load_known, run_step

KNOWN = load_known("run_xarray_misc")
STEPS = {
    "anonlocation": Step("nczarr_test/ref_xarrayanon.cdl", "nczarr_test/ref_xarrayanon.cdl", "tmp_xarrayanon",
                         "zarr,noxarray", "zarr,noxarray", ncgen_flags=("-4", "-lb")),
    "dimlocation": Step("nczarr_test/ref_xarraygroup.cdl", "nczarr_test/ref_xarraygroup.cdl", "tmp_xarraygroup",
                        "xarray", "xarray", ncgen_flags=("-4", "-lb")),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_xarray_misc(step, writer, reader, stores, request):
    """run_xarray_misc.sh: ``writer`` writes the CDL with the script's mode, ``reader``'s dump equals it."""
    run_step(request, stores, "run_xarray_misc", step, STEPS[step], writer, reader, KNOWN)
