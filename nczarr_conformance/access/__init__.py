"""Reading for users: ``open`` (the lazy dataset), ``open_dataset`` (any URL as the model), the
xarray engine (``engine="nczarr"``) and the package's top-level calls (``write``, ``convert``,
``check``: api.py).

May import ``checker``, ``fix``, ``conversion``, ``cdl``, ``sources``, ``nczarr``, ``stores`` and
the ground floor; ``peers``, ``conformance`` and ``cli`` sit above it.
"""
