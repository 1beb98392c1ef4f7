"""A thin layer over numcodecs: build the codec chain of a ``.zarray`` and run it.

Why not plain ``numcodecs.get_codec``: netcdf-c writes the shuffle filter as
``{"id": "shuffle", "elementsize": 0}``, which numcodecs takes literally as a
no-op while netcdf-c shuffles by the element size; the chain here substitutes
the array's element size so netcdf-c's chunks decode correctly; and netcdf-c
4.9.2/4.9.3 wrote numeric parameters as strings (see :func:`normalize`).

Decoding is bounded by what the metadata declares (a chunk never inflates past
its declared size, however small its stored bytes). Each stage of the chain is
decoded with a cap on its output, and stops there:

* bounded exactly, while decoding: ``zlib`` (``decompressobj`` with ``max_length``: Intel's
  ISA-L through python-isal, which inflates zlib streams two to three times as fast as
  zlib, or zlib where isal is missing), ``gzip``, ``bz2`` and ``lzma`` (the stdlib file readers, which
  decompress piecewise), ``zstd`` (python-zstandard: a frame declaring more than
  the cap is refused unread, one declaring less stops within a block of its size,
  one declaring none is read by the streaming reader up to the cap);
* bounded exactly, before decoding, from the size the stream declares: ``blosc``
  (header ``nbytes``), ``lz4`` (numcodecs' 4-byte length prefix);
* every other numcodecs codec (shuffle, delta, fixedscaleoffset, the checksums…):
  decoded, then its output size checked. Their output is a fixed multiple of
  their (already bounded) input, so memory stays bounded, by a few times the cap.
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import math
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # numcodecs is imported where a chain is built: a header-only dump decodes nothing
    from numcodecs.abc import Codec

from nczarr_conformance.errors import FormatError, MissingDependencyError, UnsupportedError

inflate_module: Any = zlib  # where isal is missing (a platform without its wheels): the standard library's,
gzip_module: Any = gzip     # same API, same bound
try:  # deflate is the codec of nearly every netCDF-4 chunk (gzip, Zarr v3's, wraps it): its inflate is most of a read
    from isal import igzip as _isal_gzip
    from isal import isal_zlib as _isal_zlib
    inflate_module, gzip_module = _isal_zlib, _isal_gzip
except ImportError:
    pass


class InflateError(FormatError):
    """A chunk decodes to more bytes than the cap; ``head`` is its first ``cap`` bytes when known."""

    def __init__(self, message: str, head: bytes | None) -> None:
        super().__init__(message)
        self.head = head


#: The numeric parameters of the codecs netcdf-c writes (and numcodecs reads), as int or float.
#: netcdf-c 4.9.2 and 4.9.3 wrote them as JSON strings (``{"id": "zlib", "level": "4"}``,
#: netcdf-c issue #3200), which netcdf-c 4.10.1 reads; numcodecs refuses or misreads them.
NUMERIC_PARAMS: dict[str, dict[str, type]] = {
    "zlib": {"level": int}, "gzip": {"level": int}, "bz2": {"level": int}, "zstd": {"level": int},
    "shuffle": {"elementsize": int}, "lz4": {"acceleration": int},
    "blosc": {"clevel": int, "shuffle": int, "blocksize": int, "typesize": int},
    "lzma": {"format": int, "check": int, "preset": int},
    "bitround": {"keepbits": int}, "quantize": {"digits": int}, "bitshuffle": {"blocksize": int},
    "fixedscaleoffset": {"offset": float, "scale": float},
    "szip": {"mask": int, "pixels_per_block": int, "pixels-per-block": int, "options_mask": int},
}
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def normalize(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` whose known numeric parameters given as numeric strings are numbers.

    Only the parameters listed in :data:`NUMERIC_PARAMS` are touched, and only when the whole
    string is a number of the parameter's kind: anything else is left for numcodecs to judge.
    """
    cfg = dict(config)
    for name, kind in NUMERIC_PARAMS.get(str(cfg.get("id")), {}).items():
        text = cfg.get(name)
        if not isinstance(text, str):
            continue
        text = text.strip()
        if _INT_TEXT.fullmatch(text):
            cfg[name] = kind(int(text))
        elif kind is float:
            try:
                value = float(text)
            except ValueError:
                continue
            if math.isfinite(value):
                cfg[name] = value
    return cfg


#: What numcodecs' CRC32C needs: numcodecs registers the codec only when a crc32c implementation imports, and
#: from 0.16.4 it takes this one (it still takes the older ``crc32c`` package, with a DeprecationWarning)
CRC32C_PACKAGE = "google-crc32c"


def crc32c_codec(where: str | None = None, location: str = "end") -> Codec:
    """numcodecs' CRC32C (Zarr v3's ``crc32c`` codec, a shard index's checksum), or one line naming the package
    to install (and ``where``, the array that needs it): without one numcodecs has no ``CRC32C`` at all, and
    the AttributeError named nothing."""
    import numcodecs

    codec_class = getattr(numcodecs, "CRC32C", None)
    if codec_class is None:
        prefix = f"{where}: " if where else ""
        raise MissingDependencyError(f"{prefix}the crc32c checksum (Zarr v3's crc32c codec, every shard index) needs "
                                     f"the {CRC32C_PACKAGE} package, which is not installed: "
                                     f"pip install {CRC32C_PACKAGE}")
    codec: Codec = codec_class(location=location)
    return codec


def check_config(config: Any) -> None:
    """FormatError unless ``config`` is None or a codec configuration with a string ``id``: what
    :func:`build` refuses before it asks numcodecs anything."""
    if config is not None and (not isinstance(config, dict) or not isinstance(config.get("id"), str)):
        raise FormatError(f"codec configuration {config!r} has no string 'id'")


def check_chain(compressor: Any, filters: Any) -> None:
    """FormatError for a ``.zarray`` chain of the wrong shape, without building a codec (numcodecs not imported)."""
    if filters is not None and not isinstance(filters, list):
        raise FormatError(f"filters must be a list or null, not {filters!r}")
    for config in [*(filters or []), compressor]:
        check_config(config)


def build(config: Any, itemsize: int) -> Codec | None:
    """One codec from its JSON configuration (None stays None)."""
    check_config(config)
    if config is None:
        return None
    cfg = normalize(config)
    if cfg["id"] == "shuffle" and not cfg.get("elementsize"):
        cfg["elementsize"] = itemsize
    if cfg["id"] == "crc32c":
        return crc32c_codec(location=cfg.get("location", "end"))
    if _decoded_here(cfg):
        return DeferredCodec(cfg)  # a Codec in all but its class (Codec is Any to the type checker)
    return numcodec(cfg)


def numcodec(cfg: dict[str, Any]) -> Codec:
    """numcodecs' codec for a normalized configuration, or UnsupportedError naming the codec."""
    import numcodecs

    try:
        return numcodecs.get_codec(dict(cfg))
    except (ValueError, KeyError, TypeError) as exc:
        raise UnsupportedError(f"codec {cfg.get('id')!r} is not available in numcodecs: {exc}") from exc


#: the codecs a read decodes without numcodecs (zlib and gzip: :func:`_zlib`, :func:`_gzip`, the stream
#: inflater; shuffle: :func:`unshuffle`), with the one integer parameter each takes
_DECODED_HERE = {"zlib": "level", "gzip": "level", "shuffle": "elementsize"}


def _decoded_here(cfg: dict[str, Any]) -> bool:
    """True for a configuration numcodecs would build as given (its one parameter an integer, no other key)
    that a read decodes without it: :class:`DeferredCodec` stands in, and numcodecs is imported only if the
    codec encodes (a write) or a caller asks for more than its id and parameter."""
    parameter = _DECODED_HERE.get(cfg["id"])
    value = cfg.get(parameter) if parameter else None
    return (parameter is not None and set(cfg) <= {"id", parameter} and isinstance(value, int)
            and not isinstance(value, bool) and (parameter != "elementsize" or value > 0))


class DeferredCodec:
    """A zlib, gzip or shuffle codec whose numcodecs object is built on first use beyond its id and parameter.

    Why: ``import numcodecs`` scans every installed package's entry points and imports blosc, zstd, lz4 and
    multiprocessing, 30 to 70 ms, as long as a whole read of a small variable. netCDF-4's usual chain is
    shuffle then zlib, which this package decodes itself (bounded: :func:`decode_stage`), so a reader of such
    a store need not pay it. Anything else (``encode``, ``decode``, ``get_config``) goes to the numcodecs codec
    of this configuration, built then: what :func:`build` returned before it deferred."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.codec_id: str = cfg["id"]
        self._cfg = cfg
        self._built: Codec | None = None
        parameter = _DECODED_HERE[self.codec_id]
        setattr(self, parameter, cfg[parameter])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_cfg", "_built"):
            raise AttributeError(name)
        return getattr(self._real(), name)

    def __eq__(self, other: object) -> bool:
        return bool(self._real() == (other._real() if isinstance(other, DeferredCodec) else other))

    def __hash__(self) -> int:
        return hash((self.codec_id, tuple(sorted(self._cfg.items()))))

    def __repr__(self) -> str:
        return repr(self._real())

    def _real(self) -> Codec:
        if self._built is None:
            self._built = numcodec(self._cfg)
        return self._built


class Pipeline:
    """filters (in order) then compressor, as Zarr v2 defines the chain."""

    def __init__(self, compressor: Any, filters: Any, itemsize: int) -> None:
        check_chain(compressor, filters)
        self.filters = [c for c in (build(f, itemsize) for f in (filters or [])) if c is not None]
        self.compressor = build(compressor, itemsize)

    def encode(self, arr: np.ndarray) -> bytes:
        buf: Any = np.ascontiguousarray(arr)
        for codec in self.filters:
            buf = codec.encode(buf)
        if self.compressor is not None:
            buf = self.compressor.encode(buf)
        return buf if isinstance(buf, bytes) else np.ascontiguousarray(buf).tobytes()

    def decode(self, raw: bytes, limit: int | None = None) -> bytes:
        """Decoded bytes; with ``limit``, InflateError as soon as they would exceed it."""
        if limit is None:
            return self._decode_unbounded(raw)
        buf = self.decode_buffer(raw, limit)
        return buf if isinstance(buf, bytes) else buf.tobytes()

    def decode_buffer(self, raw: bytes, limit: int, keep_shuffled: bool = False) -> bytes | np.ndarray:
        """:meth:`decode` bounded by ``limit``, as bytes or a 1-d uint8 array: a filter's output (shuffle's,
        the last stage of netCDF's usual chain) is not copied once more into bytes, a whole chunk's worth
        per chunk, for a reader that only views it as its dtype.

        ``keep_shuffled``: when the last stage is shuffle (:attr:`last_shuffle`), it is left undone: the
        caller unshuffles the chunk a slab at a time straight into its output (:func:`unshuffled_slabs`)
        rather than into a chunk-sized buffer of its own."""
        caps = self._stage_caps(limit)
        buf: Any = raw
        del raw  # a caller that kept no reference frees the stored bytes once the first stage has decoded them
        stages = ([self.compressor] if self.compressor is not None else []) + list(reversed(self.filters))
        if keep_shuffled and self.last_shuffle is not None:
            # shuffle keeps the size: the stage before it is capped at ``limit`` already (or, with none, the
            # check below holds the stored bytes to it)
            stages, caps = stages[:-1], caps[:-1]
        for codec, cap in zip(stages, caps, strict=True):
            buf = decode_stage(codec, buf, cap)
        if not stages:
            buf = bytes(buf)
            if len(buf) > limit:
                raise InflateError(f"{len(buf)} bytes, more than the declared {limit}", buf[:limit])
        return buf if isinstance(buf, (bytes, np.ndarray)) else bytes(buf)

    @property
    def last_shuffle(self) -> int | None:
        """The element size of the chain's last decoding stage when it is shuffle (``filters[0]``), else None."""
        if self.filters and getattr(self.filters[0], "codec_id", "") == "shuffle":
            return int(self.filters[0].elementsize)
        return None

    def _decode_unbounded(self, raw: bytes) -> bytes:
        buf: Any = raw
        if self.compressor is not None:
            buf = self.compressor.decode(buf)
        for codec in reversed(self.filters):
            buf = codec.decode(buf)
        if isinstance(buf, np.ndarray):
            return buf.tobytes()
        return bytes(buf)

    def _stage_caps(self, limit: int) -> list[int]:
        """The output cap of each decode stage (compressor first), working back from ``limit``."""
        caps: list[int] = []
        cap = limit
        for codec in self.filters:  # filters[0] decodes last: its output is the chunk
            caps.append(cap)
            cap = encoded_bound(codec, cap)
        if self.compressor is not None:
            caps.append(cap)
        return list(reversed(caps))

    def max_encoded(self, limit: int) -> int:
        """The most stored bytes a chunk decoding to ``limit`` bytes can honestly take."""
        cap = limit
        for codec in self.filters:
            cap = encoded_bound(codec, cap)
        return encoded_bound(self.compressor, cap) if self.compressor is not None else cap


SLAB_BYTES = 1 << 20  # bytes unshuffled at a time by :func:`unshuffled_slabs`: cache-sized, not chunk-sized


def unshuffled_slabs(shuffled: bytes | np.ndarray, elementsize: int, row_elements: int, rows: range,
                     ) -> Iterator[tuple[int, np.ndarray]]:
    """Rows ``rows`` (along the first axis, ``row_elements`` elements of ``elementsize`` bytes each) of a
    chunk whose bytes are still shuffled, unshuffled a slab of about :data:`SLAB_BYTES` at a time:
    ``(first row, uint8 array of the slab's rows)``, each slab valid until the next is yielded.

    Shuffle stores byte ``j`` of every element in plane ``j``, so rows ``r0..r1`` are one run in each
    plane: those runs are packed together and unshuffled (:func:`unshuffle`). A reader copying
    each slab into its output holds two slab buffers, never a second chunk-sized one.
    """
    planes = np.frombuffer(shuffled, dtype=np.uint8).reshape(elementsize, -1)
    step = max(1, SLAB_BYTES // max(1, row_elements * elementsize))
    width = min(step, len(rows)) * row_elements
    packed = np.empty((elementsize, width), dtype=np.uint8)
    plain = np.empty(elementsize * width, dtype=np.uint8)
    for r0 in range(rows.start, rows.stop, step):
        r1 = min(r0 + step, rows.stop)
        count = (r1 - r0) * row_elements
        part = packed[:, :count] if count == width else np.empty((elementsize, count), dtype=np.uint8)
        part[...] = planes[:, r0 * row_elements:r1 * row_elements]
        out = plain[:elementsize * count]
        unshuffle(part, out)
        yield r0, out


def unshuffle(planes: np.ndarray, out: np.ndarray) -> None:
    """``out`` (uint8, ``planes.size`` bytes) = the elements whose byte ``j`` is row ``j`` of ``planes``: shuffle's
    decode, as numcodecs' ``Shuffle.decode`` does it, with no numcodecs import on a read.

    One strided copy per plane: 1.2 to 1.7 times as fast as numcodecs' loop for element sizes 2 to 8 (every
    netCDF type), where numpy's copy of the transposed planes is 2.5 times as slow (measured on 64 KiB to 8 MiB).
    """
    elements = out.reshape(-1, planes.shape[0])
    for j, plane in enumerate(planes):
        elements[:, j] = plane


_SAME_SIZE = frozenset({"shuffle", "bitround", "bitshuffle"})
_CHECKSUMS = frozenset({"fletcher32", "crc32", "crc32c", "adler32", "jenkins_lookup3"})
_COMPRESSORS = frozenset({"zlib", "gzip", "bz2", "lzma", "zstd", "blosc", "lz4"})


def encoded_bound(codec: Codec, decoded: int) -> int:
    """How many bytes ``codec`` may honestly produce when encoding ``decoded`` bytes.

    Compressors expand incompressible data by a small overhead (zlib's compressBound is
    n + n/1000 + 13; blosc, lz4, zstd, bz2 and xz stay under n/8 + 4 KiB); checksums add a
    few bytes; dtype-changing filters scale by their item sizes; anything else gets 8x.
    """
    cid = getattr(codec, "codec_id", "")
    if cid in _SAME_SIZE:
        return decoded
    if cid in _CHECKSUMS:
        return decoded + 16
    if cid in _COMPRESSORS:
        return decoded + decoded // 8 + 4096
    dtype, astype = getattr(codec, "dtype", None), getattr(codec, "astype", None)
    if dtype is not None and astype is not None:
        return int(-(-decoded // max(np.dtype(dtype).itemsize, 1)) * np.dtype(astype).itemsize)
    return 8 * decoded + 4096


def _over(cap: int, head: bytes | None, size: int | None = None) -> InflateError:
    what = f"{size} bytes" if size is not None else "more bytes"
    return InflateError(f"inflates to {what}, more than the declared {cap} (decoding stopped there)", head)


def _read_capped(reader: Any, cap: int) -> bytes:  # a GzipFile (isal's or the stdlib's), BZ2File, LZMAFile
    with reader:
        out: bytes = reader.read(cap + 1)
    if len(out) > cap:
        raise _over(cap, out[:cap])
    return out


def _zlib(codec: Codec, raw: bytes, cap: int) -> bytes:
    try:
        return _inflate(inflate_module, raw, cap)
    except inflate_module.error:  # a stream the fast inflater refuses: zlib's verdict and zlib's words
        return _inflate(zlib, raw, cap)


def inflater_error() -> type[Exception]:
    """What the picked inflater raises on a damaged stream (isal's is no ``zlib.error``)."""
    error: type[Exception] = inflate_module.error
    return error


def _inflate(module: Any, raw: bytes, cap: int) -> bytes:
    d = module.decompressobj()
    out: bytes = d.decompress(raw, cap + 1)
    if len(out) > cap:
        raise _over(cap, out[:cap])
    if not d.eof:
        raise FormatError("incomplete or truncated zlib stream")
    return out


#: the deflate codecs :class:`StreamInflater` takes, with the ``wbits`` that reads each one's framing
DEFLATE_WBITS = {"zlib": 15, "gzip": 31}
#: compressed bytes handed to the inflater at a time: what it keeps of its input between calls (its
#: ``unconsumed_tail``, copied on each call) stays this small whatever piece a store hands over
FEED_BYTES = 256 << 10


def deflate_wbits(pipeline: Pipeline) -> int | None:
    """The ``wbits`` of a chain that is a deflate codec alone (zlib or gzip, no filter), else None: the
    chains :class:`StreamInflater` decodes a piece at a time."""
    if pipeline.filters or pipeline.compressor is None:
        return None
    return DEFLATE_WBITS.get(getattr(pipeline.compressor, "codec_id", ""))


class StreamFailed(Exception):
    """A piecewise inflate went wrong (damaged, truncated or over-long stream, a gzip with a second member):
    the caller decodes the chunk whole instead, which words the error exactly as every other read does."""


class StreamInflater:
    """One deflate stream fed in pieces (:meth:`feed`), its output handed on in pieces of ``piece`` bytes
    (``emit(offset, data)``; the last one shorter), never more than ``size`` bytes in all: a reader taking a
    few elements of a chunk never holds the chunk inflated, only one piece of it.

    The bound is the declared size, as :func:`_inflate`'s: a stream that would inflate past ``size``, ends
    short of it or breaks raises :class:`StreamFailed` (before anything past ``size`` is held)."""

    def __init__(self, wbits: int, size: int, piece: int, emit: Callable[[int, bytes], None]) -> None:
        self._inflater = inflate_module.decompressobj(wbits)
        self._gzip = wbits == DEFLATE_WBITS["gzip"]
        self.size, self.piece, self._emit = size, piece, emit
        self._held: list[bytes] = []  # output of the piece being filled (it arrives in bits where input ends)
        self._held_bytes = 0
        self.done = 0  # bytes emitted

    def feed(self, data: Any) -> None:
        """Inflate ``data`` (bytes-like), the stream's next compressed bytes."""
        view = memoryview(data).cast("B")
        for start in range(0, len(view), FEED_BYTES):
            self._feed(view[start:start + FEED_BYTES])

    def _feed(self, data: Any) -> None:
        inflater = self._inflater
        limited = False  # the last call stopped at its max_length: the inflater may hold more output
        while len(data) or (limited and not inflater.eof):
            if inflater.eof:
                if self._gzip:  # a second member (or trailing bytes) is GzipFile's business: decode it whole
                    raise StreamFailed("data after the gzip member")
                return  # trailing bytes after a zlib stream are ignored, as by _inflate
            want = min(self.piece - self._held_bytes, self.size + 1 - self.done - self._held_bytes)
            try:
                out = inflater.decompress(data, want)
            except Exception as exc:  # isal's error or zlib's: the whole decode words it
                raise StreamFailed(str(exc)) from exc
            limited = len(out) == want
            if not out and len(inflater.unconsumed_tail) == len(data) and len(data) and not inflater.eof:
                raise StreamFailed("the inflater took none of its input")  # never loop without progress
            data = inflater.unconsumed_tail
            if out:
                self._held.append(out)
                self._held_bytes += len(out)
                if self.done + self._held_bytes > self.size:
                    raise StreamFailed(f"inflates to more than the declared {self.size}")
                if self._held_bytes == self.piece or self.done + self._held_bytes == self.size:
                    self._flush()

    def _flush(self) -> None:
        out = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held, self._held_bytes = [], 0
        start, self.done = self.done, self.done + len(out)
        self._emit(start, out)

    def finish(self) -> None:
        """Check the stream ended where it was declared to: its end seen, exactly ``size`` bytes out."""
        if self._gzip and self._inflater.unused_data:  # a second member: GzipFile's business (decode it whole)
            raise StreamFailed("data after the gzip member")
        if not self._inflater.eof or self.done + self._held_bytes != self.size:
            raise StreamFailed(f"{self.done + self._held_bytes} bytes and {'an' if self._inflater.eof else 'no'} "
                               f"end of stream; {self.size} declared")


def _gzip(codec: Codec, raw: bytes, cap: int) -> bytes:
    try:
        return _read_capped(gzip_module.GzipFile(fileobj=io.BytesIO(raw), mode="rb"), cap)
    except InflateError:
        raise
    except Exception:  # a stream the fast inflater refuses: the standard library's verdict and words
        if gzip_module is gzip:
            raise
        return _read_capped(gzip.GzipFile(fileobj=io.BytesIO(raw), mode="rb"), cap)


def _bz2(codec: Codec, raw: bytes, cap: int) -> bytes:
    return _read_capped(bz2.BZ2File(io.BytesIO(raw), mode="rb"), cap)


def _lzma(codec: Codec, raw: bytes, cap: int) -> bytes:
    return _read_capped(lzma.LZMAFile(io.BytesIO(raw), mode="rb", format=codec.format, filters=codec.filters), cap)


def _zstd(codec: Codec, raw: bytes, cap: int) -> bytes:
    """Bounded whether or not a frame declares its size (one written from a pipe does not), across
    concatenated frames as numcodecs decodes them; a truncated frame is an error, as in numcodecs."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    try:
        declared = zstandard.frame_content_size(raw)  # the first frame's header; -1 when it does not say
        if declared > cap:
            raise _over(cap, None, declared)
        if declared >= 0:  # libzstd stops a frame that outgrows its declared size within one 128 KiB block
            frame = dctx.decompressobj()
            out: bytes = frame.decompress(raw)
            if frame.eof and not frame.unused_data:
                return out
        # several frames, or none with a size: the streaming reader stops at cap + 1 bytes, but quietly at
        # a truncated frame, so the frames are then walked once more (their output known to fit by now)
        with dctx.stream_reader(raw, read_across_frames=True) as reader:
            out = reader.read(cap + 1)
        if len(out) > cap:
            raise _over(cap, out[:cap])
        rest = raw
        while rest:
            frame = dctx.decompressobj()
            frame.decompress(rest)
            if not frame.eof:
                raise FormatError("truncated zstd frame")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise FormatError(f"zstd stream: {exc}") from exc
    return out


def _blosc(codec: Codec, raw: bytes, cap: int) -> bytes:
    if len(raw) < 16:
        raise FormatError(f"blosc chunk of {len(raw)} bytes is shorter than blosc's 16-byte header")
    nbytes = int(struct.unpack_from("<I", raw, 4)[0])  # blosc header: version, versionlz, flags, typesize, nbytes…
    if nbytes > cap:
        raise _over(cap, None, nbytes)
    return bytes(codec.decode(raw))


def _lz4(codec: Codec, raw: bytes, cap: int) -> bytes:
    if len(raw) < 4:
        raise FormatError(f"lz4 chunk of {len(raw)} bytes has no length prefix")
    nbytes = int(struct.unpack_from("<I", raw, 0)[0])  # numcodecs' LZ4 prefixes the decoded size
    if nbytes > cap:
        raise _over(cap, None, nbytes)
    return bytes(codec.decode(raw))


_BOUNDED: dict[str, Callable[[Codec, bytes, int], bytes]] = {
    "zlib": _zlib, "gzip": _gzip, "bz2": _bz2, "lzma": _lzma, "zstd": _zstd, "blosc": _blosc, "lz4": _lz4,
}


def bounded_decode(codec: Codec, buf: Any, cap: int) -> bytes:
    """One stage's decode, never holding more than about ``cap`` bytes of output."""
    data = decode_stage(codec, buf, cap)
    return data if isinstance(data, bytes) else data.tobytes()


def decode_stage(codec: Codec, buf: Any, cap: int) -> bytes | np.ndarray:
    """:func:`bounded_decode`, a filter's array output left uncopied (a 1-d uint8 view of it)."""
    codec_id = getattr(codec, "codec_id", "")
    if codec_id == "shuffle" and isinstance(codec, DeferredCodec):
        return _unshuffled(codec.elementsize, buf, cap)
    decoder = _BOUNDED.get(codec_id)
    if decoder is not None:
        raw = buf if isinstance(buf, bytes) else np.ascontiguousarray(buf).tobytes()
        return decoder(codec, raw, cap)
    out = codec.decode(buf)
    data: bytes | np.ndarray
    if isinstance(out, np.ndarray) and out.flags.c_contiguous:
        data = out.reshape(-1).view(np.uint8)
    else:
        data = out.tobytes() if isinstance(out, np.ndarray) else bytes(out)
    if len(data) > cap:
        raise _over(cap, bytes(data[:cap]), len(data))
    return data


def _unshuffled(elementsize: int, buf: Any, cap: int) -> bytes | np.ndarray:
    """Shuffle's decode stage (a 1-d uint8 array), as numcodecs' would give it: its input is no larger than what
    was decoded under ``cap``, and shuffle keeps the size; a length that is no multiple of the element size is
    numcodecs' ValueError."""
    data = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) \
        else np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    if len(data) > cap:
        raise _over(cap, bytes(data[:cap]), len(data))
    if elementsize <= 1:
        return data
    if len(data) % elementsize:
        raise ValueError("Shuffle buffer is not an integer multiple of elementsize")
    out = np.empty(len(data), dtype=np.uint8)
    unshuffle(data.reshape(elementsize, -1), out)
    return out


#: the numcodecs ids of Zarr's variable-length codecs (a v2 ``|O`` array's first filter, a v3 array→bytes codec)
VLEN_CODECS = ("vlen-utf8", "vlen-bytes")


def decode_vlen(codec_id: str, buf: bytes, count: int, where: str) -> np.ndarray:
    """A ``vlen-utf8``/``vlen-bytes`` chunk (numcodecs' VLenUTF8/VLenBytes layout: a 4-byte item count, then
    each item as a 4-byte length and its bytes) → a flat object array of ``count`` values, or one line.

    The chunk's own header says how many items follow, and numcodecs allocates that many objects before
    reading one (a 12-byte chunk claiming 2**31 items: 16 GiB): refused unless it is the declared count;
    each item's bytes then come out of ``buf``, itself bounded by the caller's decompression cap."""
    import numcodecs  # where a chunk is decoded (see the TYPE_CHECKING import above)

    codec = numcodecs.VLenUTF8() if codec_id == "vlen-utf8" else numcodecs.VLenBytes()
    if len(buf) >= 4 and (declared := int.from_bytes(buf[:4], "little")) != count:
        raise FormatError(f"{where}: {codec_id} chunk header declares {declared} values in a chunk of {count}")
    try:
        values = codec.decode(buf)
    except Exception as exc:  # numcodecs raises ValueError, TypeError, …: each a corrupt chunk here
        raise FormatError(f"{where}: {codec_id} chunk does not decode: {exc}") from exc
    if len(values) != count:
        raise FormatError(f"{where}: {len(values)} values in a chunk of {count}")
    return np.asarray(values, dtype=object)


def zlib_config(level: int) -> dict[str, Any]:
    return {"id": "zlib", "level": int(level)}


def shuffle_config(itemsize: int) -> dict[str, Any]:
    return {"id": "shuffle", "elementsize": int(itemsize)}
