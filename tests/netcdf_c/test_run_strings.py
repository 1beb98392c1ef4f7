"""Port of netcdf-c ``nczarr_test/run_strings.sh``: NC_STRING and char in pure Zarr and in NCZarr.

``ref_string.cdl`` is written with ``mode=zarr`` and with ``mode=nczarr``, dumped with
``ncdump -n ref_string`` and compared (``diff -bw``) with ``ref_string_zarr.baseline`` and
``ref_string_nczarr.baseline``. The script's ``zmapio -t string/6`` listing is not compared by
the script either (it only prints it).
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, WRITERS, Step, load_known, run_step

KNOWN = load_known("run_strings")
STEPS = {
    "zarr": Step("nczarr_test/ref_string.cdl", "nczarr_test/ref_string_zarr.baseline", "tmp_string_zarr", "zarr",
                 "zarr", ("-n", "ref_string"), ws="w"),
    "nczarr": Step("nczarr_test/ref_string.cdl", "nczarr_test/ref_string_nczarr.baseline", "tmp_string_nczarr",
                   "nczarr", "nczarr", ("-n", "ref_string"), ws="w"),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_strings(step, writer, reader, stores, request):
    """run_strings.sh testcase(file): ``writer`` writes ref_string.cdl, ``reader``'s dump equals the baseline."""
    run_step(request, stores, "run_strings", step, STEPS[step], writer, reader, KNOWN)
