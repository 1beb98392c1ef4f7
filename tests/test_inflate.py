"""Deflate chunks are inflated by ISA-L (python-isal) where it is installed, by zlib where it is not
(issue 35): both paths decode what zlib wrote, stop at the declared size and refuse a damaged stream.

Expected values come from the standard library's zlib (the writer of every stream here) and numpy,
never from the code under test. The same cases run with the module the package picked and with the
standard library's, so the fallback a platform without isal's wheels takes is tested too.
"""
from __future__ import annotations

import gzip
import types
import zlib

import numcodecs
import numpy as np
import pytest

from nczarr_conformance import codecs
from nczarr_conformance.codecs import InflateError, Pipeline
from nczarr_conformance.errors import FormatError


def test_isal_is_the_inflater_here() -> None:
    """The [test] install (a plain install too: pyproject's dependencies) has isal: the fast path is the one run."""
    isal_zlib = pytest.importorskip("isal.isal_zlib", reason="isal is a dependency: its absence is a failure")
    assert codecs.inflate_module is isal_zlib


def test_deflate_chunks_go_through_the_picked_inflater(monkeypatch: pytest.MonkeyPatch) -> None:
    class Picked(Exception):
        pass

    def decompressobj() -> None:
        raise Picked

    monkeypatch.setattr(codecs, "inflate_module", types.SimpleNamespace(decompressobj=decompressobj, error=zlib.error))
    with pytest.raises(Picked):
        _pipeline(False).decode(zlib.compress(b"abcd"), 4)


@pytest.fixture(params=["picked", "stdlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    if request.param == "stdlib":
        monkeypatch.setattr(codecs, "inflate_module", zlib)
        monkeypatch.setattr(codecs, "gzip_module", gzip)
    return codecs.inflate_module


@pytest.mark.parametrize("size", [1000, 3_000_000])
def test_gzip_members_inflate_and_stop_at_the_declared_size(inflater: types.ModuleType, size: int) -> None:
    """Zarr v3's gzip codec: two concatenated members (numcodecs reads both) and a bomb."""
    data = np.arange(size, dtype="<i4").tobytes()
    two = gzip.compress(data[: len(data) // 2], 1) + gzip.compress(data[len(data) // 2:], 1)
    codec = numcodecs.GZip(1)
    assert codecs.bounded_decode(codec, two, len(data)) == data
    with pytest.raises(InflateError, match=f"more than the declared {len(data) - 1}"):
        codecs.bounded_decode(codec, two, len(data) - 1)


def _pipeline(shuffle: bool) -> Pipeline:
    filters = [{"id": "shuffle", "elementsize": 4}] if shuffle else None
    return Pipeline({"id": "zlib", "level": 1}, filters, 4)


@pytest.mark.parametrize("shuffle", [False, True], ids=["zlib", "shuffle-zlib"])
def test_inflates_what_zlib_wrote(inflater: types.ModuleType, shuffle: bool) -> None:
    values = np.arange(250_000, dtype="<f4") * np.float32(0.5)
    stored = values.tobytes()
    if shuffle:
        stored = np.frombuffer(stored, dtype=np.uint8).reshape(-1, 4).T.tobytes()  # HDF5's byte shuffle
    raw = zlib.compress(stored, 1)
    pipeline = _pipeline(shuffle)
    decoded = pipeline.decode(raw, values.nbytes)
    assert isinstance(decoded, bytes) and decoded == values.tobytes()
    view = pipeline.decode_buffer(raw, values.nbytes)
    assert np.array_equal(np.frombuffer(view, dtype="<f4"), values)


def test_stops_at_the_declared_size(inflater: types.ModuleType) -> None:
    raw = zlib.compress(bytes(50_000_000), 9)  # 50 MB of zeros in ~50 KB
    with pytest.raises(InflateError, match="more than the declared 4000") as caught:
        _pipeline(False).decode(raw, 4000)
    assert caught.value.head == bytes(4000)  # what an over-long scalar chunk is read as


def test_a_truncated_stream_is_refused(inflater: types.ModuleType) -> None:
    raw = zlib.compress(np.arange(100_000, dtype="<i4").tobytes(), 1)
    with pytest.raises(FormatError, match="incomplete or truncated zlib stream"):
        _pipeline(False).decode(raw[: len(raw) // 2], 400_000)


def test_a_damaged_stream_is_an_error_not_data(inflater: types.ModuleType) -> None:
    raw = bytearray(zlib.compress(np.arange(100_000, dtype="<i4").tobytes(), 1))
    raw[len(raw) // 2: len(raw) // 2 + 64] = bytes(range(64))
    with pytest.raises(Exception) as caught:  # each inflater names its own error type
        _pipeline(False).decode(bytes(raw), 400_000)
    assert isinstance(caught.value, (FormatError, inflater.error, zlib.error))


def test_a_filter_output_is_viewed_not_copied() -> None:
    """Shuffle's decode gives an array: the reader keeps it as one, never copied once more into bytes (issue 35:
    one copy per chunk less)."""
    values = np.arange(1000, dtype="<i4")
    raw = numcodecs.Zlib(1).encode(numcodecs.Shuffle(4).encode(values))
    view = _pipeline(True).decode_buffer(bytes(raw), values.nbytes)
    assert isinstance(view, np.ndarray) and view.dtype == np.uint8 and view.shape == (values.nbytes,)
    assert np.array_equal(np.frombuffer(view, dtype="<i4"), values)


@pytest.mark.parametrize("damage", ["checksum", "body"])
def test_a_damaged_stream_is_named_in_zlibs_words(damage: str) -> None:
    """Messages users and tests match (nc2nczarr's damaged-chunk line, nczarr-check's) stay zlib's: a
    stream isal refuses is inflated again by zlib, whose verdict stands."""
    raw = bytearray(zlib.compress(np.arange(100_000, dtype="<i4").tobytes(), 1))
    if damage == "checksum":
        raw[-1] ^= 0xFF
    else:
        raw[len(raw) // 2: len(raw) // 2 + 64] = bytes(range(64))
    try:
        zlib.decompress(bytes(raw))
    except zlib.error as exc:
        expected = str(exc)
    with pytest.raises(zlib.error) as caught:
        _pipeline(False).decode(bytes(raw), 400_000)
    assert str(caught.value) == expected


# ---- shuffle, zlib and gzip decoded without numcodecs (codecs.DeferredCodec) --------------------------------

@pytest.mark.parametrize("elementsize", [1, 2, 4, 8])
def test_shuffle_decoded_here_is_numcodecs_unshuffle(elementsize: int) -> None:
    """The reader's own unshuffle gives numcodecs' ``Shuffle.decode`` byte for byte (the writer of every
    shuffled chunk here is numcodecs' encode)."""
    values = np.random.default_rng(elementsize).integers(0, 256, 4096 * elementsize, dtype=np.uint8)
    stored = numcodecs.Shuffle(elementsize).encode(values)
    expected = numcodecs.Shuffle(elementsize).decode(stored)
    codec = codecs.build({"id": "shuffle", "elementsize": elementsize}, elementsize)
    assert isinstance(codec, codecs.DeferredCodec)
    got = codecs.decode_stage(codec, bytes(stored), values.nbytes)
    assert bytes(np.asarray(got)) == bytes(np.asarray(expected)) == values.tobytes()


def test_shuffle_decoded_here_refuses_what_numcodecs_refuses() -> None:
    """A length that is no multiple of the element size is numcodecs' ValueError, and an output over the cap
    is an InflateError, as for every other stage."""
    codec = codecs.build({"id": "shuffle", "elementsize": 4}, 4)
    with pytest.raises(ValueError, match="integer multiple") as ours:
        codecs.decode_stage(codec, bytes(10), 100)
    with pytest.raises(ValueError) as theirs:
        numcodecs.Shuffle(4).decode(bytes(10))
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(InflateError):
        codecs.decode_stage(codec, bytes(16), 8)


@pytest.mark.parametrize("config", [{"id": "zlib", "level": 1}, {"id": "gzip", "level": 9},
                                    {"id": "shuffle", "elementsize": 2}])
def test_a_deferred_codec_is_the_numcodecs_codec_for_everything_else(config: dict[str, int]) -> None:
    """Asked for more than its id and parameter, a deferred codec is numcodecs' own: the same configuration,
    equality and encoding (what a writer stores)."""
    codec = codecs.build(dict(config), 4)
    real = numcodecs.get_codec(dict(config))
    assert isinstance(codec, codecs.DeferredCodec) and codec == real and repr(codec) == repr(real)
    assert codec.get_config() == real.get_config()
    data = np.arange(64, dtype="<i2")
    assert bytes(codec.encode(data)) == bytes(real.encode(data))


@pytest.mark.parametrize("config", [{"id": "zlib", "level": 1, "extra": 2}, {"id": "shuffle", "elementsize": [4]},
                                    {"id": "zlib", "level": True}, {"id": "shuffle", "elementsize": -1}])
def test_a_configuration_numcodecs_would_judge_is_built_by_numcodecs(config: dict[str, object]) -> None:
    """Anything but the one integer parameter goes to numcodecs as before: its verdict (an unknown keyword refused,
    anything else its object), never a deferred stand-in that would judge differently."""
    try:
        expected: object = numcodecs.get_codec(dict(config))
    except TypeError:
        with pytest.raises(codecs.UnsupportedError):
            codecs.build(dict(config), 4)
        return
    built = codecs.build(dict(config), 4)
    assert not isinstance(built, codecs.DeferredCodec) and type(built) is type(expected)
