"""The graded implementations: every writer and reader the conformance matrix runs (netCDF4-python,
zarr-python, xarray, TensorStore, GDAL, netcdf-c's tools, ours) behind one Peer interface.

Only what is graded lives here: the converter never reads its input through a peer (that is
``sources``). May import every wing below it (``access``, ``checker``, ``fix``, ``cdl``,
``sources``, ``nczarr``, ``stores``, the ground floor); ``conformance`` imports it, never the
other way round.
"""
