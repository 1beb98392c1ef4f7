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
* whole variables are materialised only under :func:`max_in_memory_bytes` — half the
  memory available to this process (:func:`machine_share`: the cgroup's limit when one is
  set, else ``MemAvailable``; at least 256 MiB) unless ``NCZARR_MAX_IN_MEMORY`` says
  otherwise; bigger ones are read chunk by chunk (``DatasetReader.iter_chunks``) or refused
  before anything is allocated;
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
#: The floor of the in-memory budget: what it was before it followed the machine (and what a
#: machine whose available memory cannot be read gets).
DEFAULT_MAX_IN_MEMORY = 256 * 1024**2
#: The share of the memory available to this process that one selection may take by default: a
#: load the machine can hold succeeds, a hostile declared shape (terabytes) is still refused.
MEMORY_SHARE = 0.5
#: A cgroup limit this large means "no limit" (cgroup v1 writes 2**63 rounded down to a page).
_NO_CGROUP_LIMIT = 2**60
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
    """The largest selection materialised whole: ``NCZARR_MAX_IN_MEMORY`` when set, else
    :func:`machine_share` of what this machine (or this process's cgroup) has available."""
    if os.environ.get("NCZARR_MAX_IN_MEMORY"):
        return _env_size("NCZARR_MAX_IN_MEMORY", DEFAULT_MAX_IN_MEMORY)
    return machine_share(*_memory_texts())


def _cgroup_number(text: str | None) -> int | None:
    """A cgroup memory file's number; None when absent, ``max`` or the "no limit" sentinel."""
    if text is None or not text.strip().isdigit():
        return None
    value = int(text.strip())
    return value if value < _NO_CGROUP_LIMIT else None


def available_memory(meminfo: str | None, cgroup_limit: str | None = None, cgroup_usage: str | None = None,
                     address_space_left: int | None = None) -> int | None:
    """Bytes this process may still take: ``MemAvailable`` (``/proc/meminfo``), lowered to what
    its cgroup's limit leaves (limit minus usage; the limit alone when usage is unknown) and to
    what its address-space limit (``RLIMIT_AS``) leaves. None when none of them says (not Linux,
    /proc unreadable, no limit)."""
    found: list[int] = []
    match = re.search(r"^MemAvailable:\s*(\d+)\s*kB", meminfo or "", re.MULTILINE)
    if match is not None:
        found.append(int(match.group(1)) * 1024)
    limit = _cgroup_number(cgroup_limit)
    if limit is not None:
        usage = _cgroup_number(cgroup_usage)
        found.append(max(0, limit - usage) if usage is not None else limit)
    if address_space_left is not None:
        found.append(max(0, address_space_left))
    return min(found) if found else None


def machine_share(meminfo: str | None, cgroup_limit: str | None = None, cgroup_usage: str | None = None,
                  address_space_left: int | None = None) -> int:
    """The default in-memory budget: :data:`MEMORY_SHARE` of :func:`available_memory`, at least
    :data:`DEFAULT_MAX_IN_MEMORY` (which is also what a machine that does not say gets)."""
    available = available_memory(meminfo, cgroup_limit, cgroup_usage, address_space_left)
    if available is None:
        return DEFAULT_MAX_IN_MEMORY
    return max(DEFAULT_MAX_IN_MEMORY, int(available * MEMORY_SHARE))


#: Where Linux says how much memory this process may take: cgroup v2, then v1.
_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(65536)
    except OSError:
        return None


def _address_space_left() -> int | None:
    """What ``RLIMIT_AS`` still lets this process map (None: no limit, or not known here)."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    status = _read_text("/proc/self/status") or ""
    match = re.search(r"^VmSize:\s*(\d+)\s*kB", status, re.MULTILINE)
    return soft - (int(match.group(1)) * 1024 if match is not None else 0)


def _memory_texts() -> tuple[str | None, str | None, str | None, int | None]:
    """This machine's ``/proc/meminfo``, its cgroup's limit and usage (None where unreadable) and
    the address space ``RLIMIT_AS`` leaves."""
    meminfo = _read_text("/proc/meminfo")
    for limit_path, usage_path in _CGROUP_FILES:
        limit = _read_text(limit_path)
        if limit is not None:
            return meminfo, limit, _read_text(usage_path), _address_space_left()
    return meminfo, None, None, _address_space_left()


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
