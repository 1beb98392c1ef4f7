"""The v3 codec chain: array→array codecs, exactly one array→bytes codec, bytes→bytes codecs.

Decoding runs numcodecs' codecs through :func:`nczarr_conformance.codecs.bounded_decode`, so
a chunk never inflates past its declared shape × item size (variable-length types: past the
in-memory budget). ``sharding_indexed`` is not decoded whole: :class:`Sharding` reads a shard's
index (16 bytes per inner chunk, + 4 for ``crc32c``) and then one inner chunk, each by byte
range, after checking the index against the shard object's size.

A sharding codec followed by bytes→bytes codecs (zarr-python writes that when a ``serializer``
is given with its default compressors) cannot be read by range: that shard is read whole, within
its bound, decoded, and its inner chunk taken from it. What this slice refuses, each in one line:
array→array codecs before a sharding codec, sharding inside sharding, index codecs other
than ``bytes`` and ``crc32c``, codecs numcodecs lacks.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # numcodecs is imported where a chunk is decoded: a header-only dump decodes nothing
    from numcodecs.abc import Codec

from nczarr_conformance import limits
from nczarr_conformance.codecs import InflateError, bounded_decode, crc32c_codec, decode_vlen, encoded_bound
from nczarr_conformance.codecs import build as build_numcodec
from nczarr_conformance.errors import FormatError, UnsupportedError
from nczarr_conformance.stores.base import Store
from nczarr_conformance.zarr3.metadata import DataType, int_tuple

#: ``once(key, load)``: ``load()``'s value, computed once per key within one read request (ReadScope.once)
Once = Callable[[str, Callable[[], Any]], Any]

ARRAY_TO_BYTES = frozenset({"bytes", "vlen-utf8", "vlen-bytes", "sharding_indexed"})
ARRAY_TO_ARRAY = frozenset({"transpose"})
MAX_UINT64 = 2**64 - 1
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _name_config(codec: Any, where: str) -> tuple[str, dict[str, Any]]:
    if isinstance(codec, str):
        return codec, {}
    if not isinstance(codec, dict) or not isinstance(codec.get("name"), str):
        raise FormatError(f"{where}: codec {codec!r} has no string 'name'")
    config = codec.get("configuration") or {}
    if not isinstance(config, dict):
        raise FormatError(f"{where}: codec {codec['name']!r} configuration must be an object")
    return str(codec["name"]), config


def _bytes_to_bytes(name: str, config: dict[str, Any], itemsize: int, where: str) -> Codec:
    """numcodecs' codec for a v3 bytes→bytes codec (core names, or ``numcodecs.<id>`` as numcodecs.zarr3 names them)."""
    if name == "gzip":
        cfg: dict[str, Any] = {"id": "gzip", "level": config.get("level", 1)}
    elif name == "zstd":
        cfg = {"id": "zstd", "level": config.get("level", 0), "checksum": bool(config.get("checksum", False))}
    elif name == "blosc":
        shuffle = config.get("shuffle", "noshuffle")
        cfg = {"id": "blosc", "cname": config.get("cname", "lz4"), "clevel": config.get("clevel", 5),
               "shuffle": _BLOSC_SHUFFLE.get(shuffle, shuffle), "blocksize": config.get("blocksize", 0)}
    elif name == "crc32c":
        cfg = {"id": "crc32c", "location": "end"}
    elif name.startswith("numcodecs."):
        cfg = {**config, "id": name.removeprefix("numcodecs.")}
    else:
        raise UnsupportedError(f"{where}: codec {name!r} is not known to this reader")
    try:
        codec = build_numcodec(cfg, itemsize)
    except UnsupportedError as exc:
        raise UnsupportedError(f"{where}: codec {name!r}: {exc}") from exc
    assert codec is not None
    return codec


@dataclass
class Chain:
    """One chunk's codecs, parsed and checked: transposes, the array→bytes codec, bytes→bytes codecs."""

    dtype: DataType
    chunk_shape: tuple[int, ...]
    transposes: list[tuple[int, ...]]
    array_to_bytes: str
    endian: str | None
    compressors: list[Codec]
    sharding: Sharding | None = None

    @property
    def decoded_nbytes(self) -> int:
        """The bytes the array→bytes codec hands back for one chunk (vlen: the in-memory budget)."""
        if self.dtype.vlen:
            return limits.max_in_memory_bytes()
        return math.prod(self.chunk_shape) * self.dtype.storage.numpy.itemsize

    def max_encoded(self) -> int:
        """The most stored bytes an honest encoding of one chunk (a whole shard, when sharded) takes."""
        cap = self.sharding.max_shard_nbytes if self.sharding is not None else self.decoded_nbytes
        for codec in self.compressors:
            cap = encoded_bound(codec, cap)
        return cap

    def decode(self, raw: bytes, where: str) -> np.ndarray:
        """One stored chunk → its values in C order of ``chunk_shape`` (native byte order)."""
        buf = self.decompress(raw, where, self.decoded_nbytes)
        return self.untranspose(self._array(buf, _permuted(self.chunk_shape, self.transposes), where))

    def untranspose(self, arr: np.ndarray) -> np.ndarray:
        """Values in the stored (transposed) axis order → the array's own order, C-contiguous."""
        for order in reversed(self.transposes):
            arr = arr.transpose(np.argsort(order))
        return np.ascontiguousarray(arr)

    @property
    def read_unit(self) -> tuple[int, ...]:
        """The shape, in the array's own axis order, of what one read decodes: the chunk, or the
        inner chunk of a shard (which a transpose before ``sharding_indexed`` lays out permuted)."""
        if self.sharding is None:
            return self.chunk_shape
        return _unpermuted(self.sharding.inner.chunk_shape, self.transposes)

    def locate(self, index: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """A read unit's index → (the shard holding it, its position in the shard's stored axis order)."""
        assert self.sharding is not None
        per_shard = _unpermuted(self.sharding.per_shard, self.transposes)
        shard = tuple(i // p for i, p in zip(index, per_shard, strict=True))
        position = tuple(i % p for i, p in zip(index, per_shard, strict=True))
        return shard, _permuted(position, self.transposes)

    def decompress(self, raw: bytes, where: str, limit: int) -> bytes:
        """The bytes→bytes codecs undone, each stage capped (the last at ``limit``)."""
        # caps[k] bounds what undoing compressors[k] yields: the bytes compressors[k - 1] made
        caps: list[int] = []
        cap = limit
        for codec in self.compressors:
            caps.append(cap)
            cap = encoded_bound(codec, cap)
        buf: bytes = raw
        try:
            for codec, cap in zip(reversed(self.compressors), reversed(caps), strict=True):
                buf = bounded_decode(codec, buf, cap)
        except InflateError as exc:
            raise FormatError(f"{where}: chunk {exc}") from exc
        except Exception as exc:  # numcodecs raises many types, ours FormatError: each a corrupt chunk here
            raise FormatError(f"{where}: chunk does not decode: {exc}") from exc
        return buf

    def _array(self, buf: bytes, shape: tuple[int, ...], where: str) -> np.ndarray:
        count = math.prod(shape)
        if self.dtype.vlen:
            return decode_vlen(self.array_to_bytes, buf, count, where).reshape(shape)
        nbytes = count * self.dtype.storage.numpy.itemsize
        if len(buf) != nbytes:
            raise FormatError(f"{where}: chunk holds {len(buf)} bytes after decoding; {nbytes} expected")
        arr = np.frombuffer(buf, dtype=self.dtype.numpy_for(self.endian)).reshape(shape)
        return arr.astype(self.dtype.storage.numpy, copy=False)


def build_chain(codecs: Any, dtype: DataType, chunk_shape: tuple[int, ...], where: str, *,
                inner: bool = False) -> Chain:
    """The checked chain of a ``codecs`` list: array→array codecs, then exactly one array→bytes
    codec, then bytes→bytes codecs (v3 core spec, "Codecs")."""
    if not isinstance(codecs, list) or not codecs:
        raise FormatError(f"{where}: codecs must be a non-empty list")
    parsed = [_name_config(c, where) for c in codecs]
    a2b = [i for i, (name, _) in enumerate(parsed) if name in ARRAY_TO_BYTES]
    if len(a2b) != 1:
        names = [parsed[i][0] for i in a2b]
        raise FormatError(f"{where}: {len(a2b)} array→bytes codecs {names}; exactly one is required")
    pos = a2b[0]
    name, config = parsed[pos]
    transposes = [_transpose(n, c, len(chunk_shape), where) for n, c in parsed[:pos]]
    compressors = []
    for n, c in parsed[pos + 1:]:
        if n in ARRAY_TO_ARRAY:
            raise FormatError(f"{where}: array→array codec {n!r} after the array→bytes codec")
        compressors.append(_bytes_to_bytes(n, c, dtype.storage.numpy.itemsize, where))
    if name != "sharding_indexed" and dtype.vlen != (name in ("vlen-utf8", "vlen-bytes")):  # inner chain: checked there
        raise FormatError(f"{where}: array→bytes codec {name!r} does not fit data_type {dtype.name!r}")
    endian = config.get("endian")
    if name == "bytes" and endian not in (None, "little", "big"):
        raise FormatError(f"{where}: bytes codec endian {endian!r}, 'little' or 'big' expected")
    sharding = None
    if name == "sharding_indexed":
        if inner:
            raise UnsupportedError(f"{where}: sharding inside sharding is not read by this reader yet")
        sharding = Sharding.parse(config, dtype, _permuted(chunk_shape, transposes), where)
    return Chain(dtype, chunk_shape, transposes, name, endian if isinstance(endian, str) else None,
                 compressors, sharding)


def _permuted(shape: Sequence[int], transposes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Axis lengths (or positions) in the array's order → in the order the transposes store them."""
    out = tuple(shape)
    for order in transposes:
        out = tuple(out[i] for i in order)
    return out


def _unpermuted(shape: Sequence[int], transposes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The inverse of :func:`_permuted`."""
    out = tuple(shape)
    for order in reversed(transposes):
        out = tuple(out[int(i)] for i in np.argsort(order))
    return out


def _transpose(name: str, config: dict[str, Any], ndim: int, where: str) -> tuple[int, ...]:
    if name != "transpose":
        raise UnsupportedError(f"{where}: codec {name!r} is not known to this reader")
    order = int_tuple(config.get("order"), "transpose order", where, 0)
    if sorted(order) != list(range(ndim)):
        raise FormatError(f"{where}: transpose order {list(order)} is not a permutation of {ndim} axes")
    return order


@dataclass
class Sharding:
    """``sharding_indexed``: inner chunks of ``inner.chunk_shape`` in a shard, found by its index."""

    shard_shape: tuple[int, ...]
    inner: Chain
    per_shard: tuple[int, ...]
    index_endian: str
    index_crc: bool
    index_at_start: bool

    @classmethod
    def parse(cls, config: dict[str, Any], dtype: DataType, shard_shape: tuple[int, ...], where: str) -> Sharding:
        inner_shape = int_tuple(config.get("chunk_shape"), "sharding chunk_shape", where, 1)
        if len(inner_shape) != len(shard_shape) or any(s % c for s, c in zip(shard_shape, inner_shape, strict=True)):
            raise FormatError(f"{where}: inner chunk_shape {list(inner_shape)} does not divide the shard shape "
                              f"{list(shard_shape)}")
        inner = build_chain(config.get("codecs"), dtype, inner_shape, f"{where} (inner codecs)", inner=True)
        index_codecs = config.get("index_codecs")
        if not isinstance(index_codecs, list):  # the spec: "an array of objects"; a string or object iterates
            raise FormatError(f"{where}: index_codecs {index_codecs!r} must be a list of codecs")
        index = [_name_config(c, where) for c in index_codecs]
        names = [n for n, _ in index]
        if names not in (["bytes"], ["bytes", "crc32c"]):
            raise UnsupportedError(f"{where}: index_codecs {names}: only bytes [+ crc32c] are read")
        endian = index[0][1].get("endian", "little")
        location = config.get("index_location", "end")
        if location not in ("start", "end"):
            raise FormatError(f"{where}: index_location {location!r}, 'start' or 'end' expected")
        per_shard = tuple(s // c for s, c in zip(shard_shape, inner_shape, strict=True))
        return cls(shard_shape, inner, per_shard, "big" if endian == "big" else "little", len(names) == 2,
                   location == "start")

    @property
    def index_nbytes(self) -> int:
        """16 bytes (offset, length) per inner chunk, + 4 for the crc32c."""
        return 16 * math.prod(self.per_shard) + (4 if self.index_crc else 0)

    @property
    def max_shard_nbytes(self) -> int:
        """The most bytes an honest shard takes: every inner chunk at its bound, and the index."""
        return math.prod(self.per_shard) * self.inner.max_encoded() + self.index_nbytes

    def read_inner(self, store: Store, shard_key: str, position: Sequence[int],
                   once: Once | None = None) -> bytes | None:
        """The stored bytes of one inner chunk (None: absent), read by byte range. ``once(key, load)``
        (a request's :class:`~nczarr_conformance.nczarr.reader.ReadScope`) keeps each shard's index read
        once per request however many of its inner chunks the request reads (one GET, not one per chunk)."""
        return self.inner_from(lambda start, length: store.get_range(shard_key, start, length), shard_key, position,
                               once)

    def inner_from(self, fetch: Callable[[int, int], tuple[bytes, int] | None], shard_key: str,
                   position: Sequence[int], once: Once | None = None) -> bytes | None:
        """One inner chunk's stored bytes, ``fetch(start, length)`` giving (bytes, shard size) of a range."""
        load = functools.partial(self._read_index, fetch, shard_key)
        found = load() if once is None else once(f"shard index {shard_key}", load)
        if found is None:
            return None
        table, total = found
        size = self.index_nbytes
        offset, length = (int(v) for v in table[tuple(position)])
        if offset == MAX_UINT64 and length == MAX_UINT64:
            return None
        lo, hi = (size, total) if self.index_at_start else (0, total - size)
        if offset < lo or offset + length > hi:
            raise FormatError(f"{shard_key}: index entry {list(position)} points at bytes {offset}..{offset + length}, "
                              f"outside the shard's data ({lo}..{hi})")
        bound = self.inner.max_encoded()
        if length > bound:
            raise limits.LimitError(f"{shard_key}: inner chunk {list(position)} is {length} bytes, more than the "
                                    f"{bound} an inner chunk of {list(self.inner.chunk_shape)} can take")
        got = fetch(offset, length)
        if got is None or len(got[0]) != length:
            raise FormatError(f"{shard_key}: inner chunk {list(position)} cut short")
        return got[0]

    def _read_index(self, fetch: Callable[[int, int], tuple[bytes, int] | None],
                    shard_key: str) -> tuple[np.ndarray, int] | None:
        """A shard's decoded index and the shard's size (None: no shard), its size checked first."""
        size = self.index_nbytes
        if size > limits.max_in_memory_bytes():
            raise limits.LimitError(f"{shard_key}: a shard of {list(self.per_shard)} inner chunks has a {size}-byte "
                                    f"index; refusing to hold more than {limits.max_in_memory_bytes()} "
                                    "(NCZARR_MAX_IN_MEMORY)")
        got = fetch(0 if self.index_at_start else -size, size)
        if got is None:
            return None
        raw, total = got
        if total < size or len(raw) != size:
            raise FormatError(f"{shard_key}: shard of {total} bytes is shorter than its {size}-byte index")
        return self._index(raw, shard_key), total

    def decode_index(self, raw: bytes, where: str) -> np.ndarray:
        """The index table (``per_shard`` + (2,): offset, length) of a shard's index bytes, checksum verified."""
        return self._index(raw, where)

    def _index(self, raw: bytes, where: str) -> np.ndarray:
        body = raw
        if self.index_crc:
            checksum = crc32c_codec(where)  # outside the try: a missing package is not a bad checksum
            try:
                body = bytes(checksum.decode(raw))
            except Exception as exc:
                raise FormatError(f"{where}: shard index checksum: {exc}") from exc
        dtype = np.dtype(">u8" if self.index_endian == "big" else "<u8")
        return np.frombuffer(body, dtype=dtype).reshape((*self.per_shard, 2))
