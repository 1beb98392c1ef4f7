"""Hostile v3 metadata and shards: one line naming the object and the cause, exit 2, bounded memory."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numcodecs
import numpy as np
import pytest

from nczarr_conformance.errors import FormatError
from nczarr_conformance.limits import LimitError
from nczarr_conformance.stores import open_store
from nczarr_conformance.zarr3.reader import V3Reader
from tests.check.test_check_cli import assert_one_line_failure, run

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _sharded(path: Path) -> Path:
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    a = g.create_array("v", shape=(16,), chunks=(4,), shards=(8,), dtype="int32", dimension_names=["t"])
    a[:] = np.arange(16)
    return path / "v" / "c" / "0"


def _edit(path: Path, change) -> None:
    meta = path / "v" / "zarr.json"
    doc = json.loads(meta.read_text())
    change(doc)
    meta.write_text(json.dumps(doc))


def _read(path: Path) -> None:
    with open_store(str(path)) as store:
        V3Reader(store).read_variable("/v")


def test_index_pointing_past_the_shard(tmp_path):
    shard = _sharded(tmp_path / "s.zarr")
    raw = shard.read_bytes()
    index = np.frombuffer(raw[-36:-4], dtype="<u8").copy().reshape(2, 2)
    index[1, 0] = len(raw) + 1000  # offset of inner chunk 1 beyond the shard
    body = index.tobytes()
    shard.write_bytes(raw[:-36] + bytes(numcodecs.CRC32C(location="end").encode(body)))
    with pytest.raises(FormatError, match=r"/v/c/0: index entry \[1\] points at bytes \d+\.\.\d+, outside"):
        _read(tmp_path / "s.zarr")
    line = assert_one_line_failure(run(str(tmp_path / "s.zarr"), module="dump"))
    assert "outside the shard's data" in line and "/v/c/0" in line


@pytest.mark.parametrize("half", [0, 1], ids=["offset", "length"])
def test_an_index_entry_missing_only_in_one_half_is_damage_not_fill(tmp_path, half):
    """The sharding spec marks an absent inner chunk by offset *and* nbytes both 2^64-1; one of them alone
    is a damaged index, never a chunk read as fill (which would hide the damage as plausible values)."""
    shard = _sharded(tmp_path / "s.zarr")
    raw = shard.read_bytes()
    index = np.frombuffer(raw[-36:-4], dtype="<u8").copy().reshape(2, 2)
    index[1, half] = 2**64 - 1
    shard.write_bytes(raw[:-36] + bytes(numcodecs.CRC32C(location="end").encode(index.tobytes())))
    with pytest.raises(FormatError, match=r"/v/c/0: index entry \[1\] points at bytes \d+\.\.\d+, outside"):
        _read(tmp_path / "s.zarr")
    index[1] = 2**64 - 1  # both halves: the spec's absent inner chunk, read as the fill value
    shard.write_bytes(raw[:-36] + bytes(numcodecs.CRC32C(location="end").encode(index.tobytes())))
    with open_store(str(tmp_path / "s.zarr")) as store:
        got = V3Reader(store).read_variable("/v")
    want = np.arange(16)
    want[4:8] = json.loads((tmp_path / "s.zarr" / "v" / "zarr.json").read_text())["fill_value"]
    np.testing.assert_array_equal(got, want)


def test_shard_shorter_than_its_index(tmp_path):
    shard = _sharded(tmp_path / "s.zarr")
    shard.write_bytes(b"\x00" * 10)
    with pytest.raises(FormatError, match=r"/v/c/0: shard of 10 bytes is shorter than its 36-byte index"):
        _read(tmp_path / "s.zarr")


def test_huge_declared_shard_is_refused_before_reading(tmp_path):
    _sharded(tmp_path / "s.zarr")

    def huge(doc):
        doc["shape"] = [2**40]
        doc["chunk_grid"]["configuration"]["chunk_shape"] = [2**40]
        doc["codecs"][0]["configuration"]["chunk_shape"] = [1]
    _edit(tmp_path / "s.zarr", huge)
    tracemalloc.start()
    try:
        with open_store(str(tmp_path / "s.zarr")) as store:
            reader = V3Reader(store)
            with pytest.raises(LimitError, match=r"/v/c/0: a shard of \[1099511627776\] inner chunks has a "
                                                 r"17592186044420-byte index"):
                reader.read_region("/v", (slice(0, 1),))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024**2


def test_inner_chunk_longer_than_its_bound(tmp_path):
    shard = _sharded(tmp_path / "s.zarr")
    raw = shard.read_bytes()
    index = np.array([[0, 4 * 4 + 10**6], [0, 4]], dtype="<u8")  # claims a megabyte for 4 int32 values
    shard.write_bytes(b"\x00" * (10**6 + 100) + bytes(numcodecs.CRC32C(location="end").encode(index.tobytes())))
    del raw
    with pytest.raises(LimitError, match=r"inner chunk \[0\] is 1000016 bytes, more than the"):
        _read(tmp_path / "s.zarr")


def test_two_array_to_bytes_codecs(tmp_path):
    _sharded(tmp_path / "s.zarr")
    _edit(tmp_path / "s.zarr", lambda doc: doc.update(codecs=[{"name": "bytes"}, {"name": "bytes"}]))
    with pytest.raises(FormatError, match=r"^/v/zarr.json: 2 array→bytes codecs"):  # invalid: the open fails
        _read(tmp_path / "s.zarr")
    line = assert_one_line_failure(run(str(tmp_path / "s.zarr"), module="dump"))
    assert line.endswith("/v/zarr.json: 2 array→bytes codecs ['bytes', 'bytes']; exactly one is required")


def test_unknown_codec_fails_the_data_not_the_header(tmp_path):
    _sharded(tmp_path / "s.zarr")
    _edit(tmp_path / "s.zarr", lambda doc: doc.update(codecs=[{"name": "bytes"}, {"name": "frobnicate"}]))
    header = run("-h", str(tmp_path / "s.zarr"), module="dump")
    assert header.returncode == 0 and "int v(t)" in header.stdout, header.stderr
    line = assert_one_line_failure(run(str(tmp_path / "s.zarr"), module="dump"))
    assert line.endswith("/v: data cannot be read: /v/zarr.json: codec 'frobnicate' is not known to this reader")


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(data_type="bool"), "/v/zarr.json: data_type 'bool' has no netCDF type"),
    (lambda d: d.update(fill_value="0xZZ"), "fill_value '0xZZ' is not an integer"),
    (lambda d: d.update(chunk_key_encoding={"name": "odd"}), "chunk_key_encoding {'name': 'odd'}: only"),
    (lambda d: d.update(shape=[2, 2]), "chunk_shape [8] has not the array's 2 dimensions"),
    (lambda d: d.update(zarr_format=2), "/v/zarr.json: zarr_format 2, 3 expected"),
])
def test_bad_metadata_is_one_line(tmp_path, change, message):
    _sharded(tmp_path / "s.zarr")
    _edit(tmp_path / "s.zarr", change)
    line = assert_one_line_failure(run("-h", str(tmp_path / "s.zarr"), module="dump"))
    assert message in line and line.startswith("nczarr-dump: ")


@pytest.mark.parametrize("index_codecs", [1, "bytes", {"name": "bytes"}])
def test_index_codecs_not_a_list_is_one_line(tmp_path, index_codecs):
    """Found by fuzzing nczarr-check's v3 rules: an ``index_codecs`` that is no list raised TypeError (a traceback
    in nczarr-dump, NCZ-CHECK-CRASH in nczarr-check); the sharding spec has it "an array of objects"."""
    _sharded(tmp_path / "s.zarr")
    _edit(tmp_path / "s.zarr", lambda d: d["codecs"][0]["configuration"].update(index_codecs=index_codecs))
    line = assert_one_line_failure(run(str(tmp_path / "s.zarr"), module="dump"))
    assert line.startswith("nczarr-dump: ") and "/v/zarr.json: index_codecs" in line and "must be a list" in line


def _strings(path: Path) -> Path:
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    a = g.create_array("s", shape=(5,), chunks=(5,), dtype=str, dimension_names=["x"], compressors=None)
    a[:] = ["a", "b", "c", "d", "e"]
    return path / "s" / "c" / "0"


def test_vlen_chunk_header_count_is_checked_before_numcodecs_allocates(tmp_path):
    """A 12-byte vlen-utf8 chunk whose header claims 2**26 items made numcodecs allocate 2**26 objects (560 MB peak
    for a 5-element array; 2**31 is 16 GiB) before it found the chunk truncated: the count is the chunk's, or
    refused."""
    chunk = _strings(tmp_path / "s.zarr")
    chunk.write_bytes((2**26).to_bytes(4, "little") + b"\x00" * 8)
    tracemalloc.start()
    try:
        with open_store(str(tmp_path / "s.zarr")) as store, pytest.raises(
                FormatError, match=r"^/s/c/0: vlen-utf8 chunk header declares 67108864 values in a chunk of 5$"):
            V3Reader(store).read_variable("/s")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024**2
    line = assert_one_line_failure(run(str(tmp_path / "s.zarr"), module="dump"))
    assert line.endswith("/s/c/0: vlen-utf8 chunk header declares 67108864 values in a chunk of 5")


def test_fixed_length_strings_longer_than_numpy_holds_are_one_line(tmp_path):
    """length_bytes 2**40: numpy's TypeError ("data type 'S1099511627776' not understood") was the "unexpected
    TypeError ... this is a bug" line in nczarr-dump and NCZ-CHECK-CRASH in nczarr-check."""
    _sharded(tmp_path / "s.zarr")
    _edit(tmp_path / "s.zarr", lambda d: d.update(data_type={"name": "null_terminated_bytes",
                                                             "configuration": {"length_bytes": 2**40}},
                                                  fill_value="", codecs=[{"name": "bytes"}]))
    line = assert_one_line_failure(run("-h", str(tmp_path / "s.zarr"), module="dump"))
    assert line.endswith("/v/zarr.json: data_type null_terminated_bytes length_bytes 1099511627776: longer than "
                         "numpy's fixed-length strings hold")
    checked = run(str(tmp_path / "s.zarr"), module="check")
    assert "NCZ-CHECK-CRASH" not in checked.stdout and "length_bytes 1099511627776" in checked.stdout, checked.stdout


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_group_named_with_an_at_sign_reads(tmp_path, zarr_format):
    """netCDF and Zarr allow '@' in a group's name; the reader's dimension placeholders were ``@group@name``, split
    at the group's own '@' (KeyError '/g': the "this is a bug" line; NCZ-CHECK-CRASH for v3)."""
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=zarr_format)
    a = g.create_group("g@1").create_array("v", shape=(3,), chunks=(3,), dtype="int32",
                                           **({"dimension_names": ["x"]} if zarr_format == 3 else {}))
    if zarr_format == 2:
        a.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    a[:] = [1, 2, 3]
    dumped = run(str(tmp_path / "s.zarr"), module="dump")
    assert dumped.returncode == 0, dumped.stderr
    assert "group: g@1 {" in dumped.stdout and "\tx = 3 ;" in dumped.stdout and "v = 1, 2, 3 ;" in dumped.stdout
    checked = run(str(tmp_path / "s.zarr"), module="check")
    assert checked.returncode == 0 and "NCZ-CHECK-CRASH" not in checked.stdout, checked.stdout


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_dimension_name_holding_a_slash_is_one_line(tmp_path, zarr_format):
    """``dimension_names`` (or ``_ARRAY_DIMENSIONS``) ``["a/b"]``: no netCDF name holds '/'; read as a path from the
    root (kerchunk's spelling, docs/reader.md) it names a group 'a' that is not there (once a KeyError 'a', after
    the header was printed)."""
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=zarr_format)
    a = g.create_array("v", shape=(3,), chunks=(3,), dtype="int32",
                       **({"dimension_names": ["a/b"]} if zarr_format == 3 else {}))
    if zarr_format == 2:
        a.attrs["_ARRAY_DIMENSIONS"] = ["a/b"]
    a[:] = [1, 2, 3]
    dumped = run(str(tmp_path / "s.zarr"), module="dump")
    line = assert_one_line_failure(dumped)
    assert line.endswith("/v: dimension 'a/b' names group /a, which is neither the array's group / nor one of its "
                         "ancestors") and dumped.stdout == ""
