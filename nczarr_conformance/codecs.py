"""A thin layer over numcodecs: build the codec chain of a ``.zarray`` and run it.

Why not plain ``numcodecs.get_codec``: netcdf-c writes the shuffle filter as
``{"id": "shuffle", "elementsize": 0}``, which numcodecs takes literally as a
no-op while netcdf-c shuffles by the element size; the chain here substitutes
the array's element size so netcdf-c's chunks decode correctly.
"""
from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec

from .errors import FormatError, UnsupportedError


def build(config: Any, itemsize: int) -> Codec | None:
    """One codec from its JSON configuration (None stays None)."""
    if config is None:
        return None
    if not isinstance(config, dict) or not isinstance(config.get("id"), str):
        raise FormatError(f"codec configuration {config!r} has no string 'id'")
    cfg = dict(config)
    if cfg["id"] == "shuffle" and not cfg.get("elementsize"):
        cfg["elementsize"] = itemsize
    try:
        return numcodecs.get_codec(cfg)
    except (ValueError, KeyError, TypeError) as exc:
        raise UnsupportedError(f"codec {config.get('id')!r} is not available in numcodecs: {exc}") from exc


class Pipeline:
    """filters (in order) then compressor, as Zarr v2 defines the chain."""

    def __init__(self, compressor: Any, filters: Any, itemsize: int) -> None:
        if filters is not None and not isinstance(filters, list):
            raise FormatError(f"filters must be a list or null, not {filters!r}")
        self.filters = [c for c in (build(f, itemsize) for f in (filters or [])) if c is not None]
        self.compressor = build(compressor, itemsize)

    def encode(self, arr: np.ndarray) -> bytes:
        buf: Any = np.ascontiguousarray(arr)
        for codec in self.filters:
            buf = codec.encode(buf)
        if self.compressor is not None:
            buf = self.compressor.encode(buf)
        return buf if isinstance(buf, bytes) else np.ascontiguousarray(buf).tobytes()

    def decode(self, raw: bytes) -> bytes:
        buf: Any = raw
        if self.compressor is not None:
            buf = self.compressor.decode(buf)
        for codec in reversed(self.filters):
            buf = codec.decode(buf)
        if isinstance(buf, np.ndarray):
            return buf.tobytes()
        return bytes(buf)


def zlib_config(level: int) -> dict[str, Any]:
    return {"id": "zlib", "level": int(level)}


def shuffle_config(itemsize: int) -> dict[str, Any]:
    return {"id": "shuffle", "elementsize": int(itemsize)}
