"""How much a reader will take from a store: the bounds that make hostile stores cheap to refuse.

A store is untrusted input. Every object is read with a byte limit, so memory is
bounded by what the metadata declares, never by what a file, a zip member or an
S3 object happens to hold:

* metadata objects (``.zgroup``, ``.zarray``, ``.zattrs``, ``.zmetadata``, NCZarr v1
  objects) are capped at :func:`max_metadata_bytes` — 64 MiB unless the
  environment variable ``NCZARR_MAX_METADATA`` says otherwise (bytes, or with a
  ``K``/``M``/``G`` suffix); netcdf-c writes kilobytes;
* JSON nesting is capped at :data:`MAX_JSON_DEPTH`, checked before parsing, so a
  deep document is a clear error rather than Python's ``RecursionError``;
* a chunk decodes to at most its declared size (see :mod:`nczarr_conformance.codecs`);
* whole variables are materialised only under :func:`max_in_memory_bytes` — 256 MiB
  unless ``NCZARR_MAX_IN_MEMORY`` says otherwise; bigger ones are read chunk by chunk
  (``DatasetReader.iter_chunks``) or refused;
* an array whose declared geometry leaves int64 (:func:`int64_overflow`) is refused when
  opened, before numpy meets it.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

import numpy as np

from nczarr_conformance.errors import FormatError

DEFAULT_MAX_METADATA = 64 * 1024**2
DEFAULT_MAX_IN_MEMORY = 256 * 1024**2
#: Deepest JSON nesting accepted: real metadata nests a few levels, Python's parser gives up
#: near 1000, and code recursing over a value needs stack to spare (attribute decoding fails
#: near 400 levels). The reader and nczarr-check share this one bound.
MAX_JSON_DEPTH = 256

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class LimitError(FormatError):
    """An object or a decoded chunk is bigger than the bound that applies to it."""


def _env_size(name: str, default: int) -> int:
    text = os.environ.get(name)
    if not text:
        return default
    match = _SIZE.match(text)
    if match is None:
        raise FormatError(f"{name}={text!r}: not a size (bytes, or a number with K, M or G)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "")[:1].lower()]


def max_metadata_bytes() -> int:
    """The largest metadata object read (``NCZARR_MAX_METADATA``, default 64 MiB)."""
    return _env_size("NCZARR_MAX_METADATA", DEFAULT_MAX_METADATA)


def max_in_memory_bytes() -> int:
    """The largest variable materialised whole (``NCZARR_MAX_IN_MEMORY``, default 256 MiB)."""
    return _env_size("NCZARR_MAX_IN_MEMORY", DEFAULT_MAX_IN_MEMORY)


# A JSON string: quote, then any run of non-quote non-backslash bytes or escape pairs, then quote.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BLOCK = 1 << 20
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(raw: bytes) -> int:
    """How deeply arrays and objects nest in a JSON text, without parsing it (no recursion).

    Brackets inside strings do not count; blocks of 1 MiB keep the scan's own memory small.
    """
    stripped = _JSON_STRING.sub(b'""', raw) if b'"' in raw else raw
    codes = np.frombuffer(stripped, dtype=np.uint8)
    level, deepest = 0, 0
    for start in range(0, len(codes), _BLOCK):
        steps = _OPEN[codes[start:start + _BLOCK]].astype(np.int64)
        if not steps.any():
            continue
        running = np.cumsum(steps) + level
        deepest = max(deepest, int(running.max()))
        level = int(running[-1])
    return deepest


def check_json_depth(raw: bytes, where: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH` before any parser recurses into it."""
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise LimitError(f"{where}: JSON nested {depth} levels deep; more than {MAX_JSON_DEPTH} is refused")


def too_big(where: str, size: int | None, limit: int) -> LimitError:
    """The one wording for "this object is over its bound" (size None: found while reading)."""
    held = f"{size} bytes" if size is not None else "more bytes"
    return LimitError(f"{where}: {held}, more than the {limit}-byte limit for this object")


#: numpy holds positions, extents and byte counts as int64 (intp): past this, numpy (so this
#: reader and xarray) cannot address an array, and netcdf-c 4.10.1 reads an extent past it as
#: negative or refuses the array (EINVAL for a chunk past it).
INT64_MAX = 2**63 - 1


def int64_overflow(shape: Sequence[int], chunks: Sequence[int] | None, itemsize: int) -> str | None:
    """The first part of an array's declared geometry that leaves int64, in words; None when all fits.

    Checked with Python integers, before anything reaches numpy: each extent of the shape and
    of a chunk, the positions the chunk grid spans (its last chunk runs past the shape), and
    the element and byte counts of the array and of one chunk.
    """
    quantities: list[tuple[int, str]] = [(n, f"dimension {d} has extent {n}") for d, n in enumerate(shape)]
    if chunks is not None:
        quantities += [(c, f"the chunks of dimension {d} have extent {c}") for d, c in enumerate(chunks)]
        quantities += [(-(-n // c) * c, f"the chunk grid of dimension {d} spans {-(-n // c) * c} positions")
                       for d, (n, c) in enumerate(zip(shape, chunks, strict=True))]
        chunk_bytes = math.prod(chunks) * itemsize
        quantities.append((chunk_bytes, f"one chunk holds {chunk_bytes} bytes"))
    elements = math.prod(shape)
    quantities += [(elements, f"the array holds {elements} elements"),
                   (elements * itemsize, f"the array holds {elements * itemsize} bytes")]
    return next((what for value, what in quantities if value > INT64_MAX), None)
