"""netCDF-4 in, NCZarr out: ``convert`` (from_netcdf.py), nccopy's transforms, ``--append``,
``--concat`` and multi-file appends, and the dask cluster they run on.

Reads input only through ``sources`` and writes only through ``nczarr``/``stores``: nothing here
imports the graded implementations or the matrix (tests/test_architecture.py holds it).
"""

from nczarr_conformance.conversion import append_v3  # noqa: F401  (registers --append onto a Zarr v3 store)
