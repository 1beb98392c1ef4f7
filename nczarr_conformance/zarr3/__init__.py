"""Zarr v3, read (issue #25, first slice): pure Zarr v3 as zarr-python 3 and xarray write it.

The wing sits just above ``nczarr/`` (it reuses its attribute typing, dtypes and the chunk
reader) and below everything that opens datasets: ``open_reader`` picks the v2 or the v3
reader for a store, so ``open_dataset``, the lazy API, the xarray engine, ``nczarr-dump``
and ``nczarr-check`` all read v3 through it.

* ``metadata.py``: ``zarr.json`` → typed array/group metadata (data types, fill values,
  chunk key encodings, dimension names);
* ``chain.py``: the codec chain (``transpose``, ``bytes``, ``vlen-*``, numcodecs' bytes→bytes
  codecs, ``sharding_indexed`` with ranged reads of one inner chunk), decoded within bounds;
* ``reader.py``: the store → canonical model reader.
"""
from __future__ import annotations

from nczarr_conformance.zarr3 import draft  # noqa: F401  (registers the draft NCZarr v3 layout with open_reader)
