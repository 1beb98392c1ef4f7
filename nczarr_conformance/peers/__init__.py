"""The graded implementations: every writer and reader the conformance matrix runs (netCDF4-python,
zarr-python, xarray, TensorStore, GDAL, ours) behind one Peer interface, and the command adapters through
which implementations nobody here wrote join (``command``: Debian's ncdump/ncgen 4.9.0, NCO's ncks,
zarr-python 2.18/3.4 and zarrita are declared in ``nczarr-conformance.toml``, their scripts in adapters/).

Only what is graded lives here: the converter never reads its input through a peer (that is
``sources``). May import every wing below it (``access``, ``checker``, ``fix``, ``cdl``,
``sources``, ``nczarr``, ``stores``, the ground floor); ``conformance`` imports it, never the
other way round.
"""
