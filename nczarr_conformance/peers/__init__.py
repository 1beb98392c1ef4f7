"""The graded implementations: every writer and reader the conformance matrix runs (netCDF4-python,
zarr-python, xarray, TensorStore, GDAL, ours; one module each, registered by ``implementations``) behind one
Peer interface, and the command adapters through which implementations nobody here wrote join (``command``:
declared in ``nczarr-conformance.toml``, their scripts and pinned faults in adapters/).

Only what is graded lives here: the converter never reads its input through a peer (that is
``sources``). May import every wing below it (``access``, ``checker``, ``fix``, ``cdl``,
``sources``, ``nczarr``, ``stores``, the ground floor); ``conformance`` imports it, never the
other way round.
"""
