"""Port of netcdf-c ``nczarr_test/run_misc.sh``: ``/`` as the Zarr dimension separator.

The script writes ``ZARR.DIMENSION_SEPARATOR=/`` into ``.ncrc`` in its working directory, builds
``ref_misc1.cdl`` and ``ref_misc2.cdl`` with ``ncgen -4 -lb`` into ``mode=nczarr,file`` and
compares ``ncdump -n tmp_misc<N>`` with the source (``diff -bw``). Writers: ncgen 4.9.0 and
netCDF4-python 4.10.1, each run in a directory holding that ``.ncrc``; ours has no option to
write ``/`` (it reads it), so it is not a writer here. A second test checks the chunk keys
really are ``/``-separated (what the ``.ncrc`` asks for), so the cells do not pass vacuously.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import READERS, Step, load_known, run_step

KNOWN = load_known("run_misc")
RC = "ZARR.DIMENSION_SEPARATOR=/\n"
WRITERS = ("ncgen-4.9.0", "netcdf4-4.10.1")
STEPS = {
    "misc1": Step("nczarr_test/ref_misc1.cdl", "nczarr_test/ref_misc1.cdl", "tmp_dimsep", "nczarr", "nczarr",
                  ("-n", "tmp_misc1"), ws="w", ncgen_flags=("-4", "-lb")),
    "misc2": Step("nczarr_test/ref_misc2.cdl", "nczarr_test/ref_misc2.cdl", "tmp_extra", "nczarr", "nczarr",
                  ("-n", "tmp_misc2"), ws="w", ncgen_flags=("-4", "-lb")),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_misc(step, writer, reader, stores, request):
    """run_misc.sh testcase1/2(file): written under ``ZARR.DIMENSION_SEPARATOR=/``, read back as the source."""
    run_step(request, stores, "run_misc", step, STEPS[step], writer, reader, KNOWN, rc=RC)


@pytest.mark.peer
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_misc_chunk_keys_use_slash(step, writer, stores, request):
    """The store the cells read holds ``/``-separated chunk keys and says so in ``.zarray``."""
    import json

    store, failed = stores.built.get(f"run_misc-{step}-{writer}", (None, "not built"))
    if store is None:
        pytest.skip(f"store not built by the cells: {failed}")
    zarray = json.loads((store / "v" / ".zarray").read_text())
    chunks = sorted(p.relative_to(store / "v").as_posix() for p in (store / "v").rglob("*")
                    if p.is_file() and not p.name.startswith("."))
    assert zarray.get("dimension_separator") == "/" and chunks and all("/" in c for c in chunks), (zarray, chunks)
