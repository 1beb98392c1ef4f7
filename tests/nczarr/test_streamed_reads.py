"""A chunk whose chain is a deflate codec alone is inflated a piece at a time and only its selected elements are
copied out (nczarr/streamed.py, codecs.py ``StreamInflater``, ``Store.read_pieces``): the values are netCDF4's, the
inflated chunk is never held whole, and a damaged chunk fails with the one line the whole decode gives."""
from __future__ import annotations

import functools
import http.server
import json
import threading
import zlib

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import FormatError
from nczarr_conformance.nczarr import reader, streamed
from nczarr_conformance.stores import directory, remote

SHAPE, CHUNKS = (10, 13, 11), (4, 6, 5)  # partial chunks at every edge
VARIABLES = {"f": "<f4", "b": ">i8", "d": "<f8", "u": ">u2"}  # little- and big-endian, 2- to 8-byte types


@pytest.fixture(scope="module")
def deflated(tmp_path_factory):
    """A netCDF-4 file of zlib-only (no shuffle) variables and its NCZarr conversion, one variable in gzip."""
    import netCDF4

    tmp = tmp_path_factory.mktemp("streamed")
    path = tmp / "z.nc"
    rng = np.random.default_rng(35)
    with netCDF4.Dataset(path, "w") as nc:
        for name, n in zip(("t", "y", "x"), SHAPE, strict=True):
            nc.createDimension(name, n)
        for name, dtype in VARIABLES.items():
            v = nc.createVariable(name, np.dtype(dtype), ("t", "y", "x"), zlib=True, shuffle=False,
                                  chunksizes=CHUNKS, endian="big" if dtype[0] == ">" else "little")
            v[:] = (rng.random(SHAPE) * 30000).astype(dtype[1:])
        for name, n in (("rt", 4), ("ry", 200), ("rx", 200)):
            nc.createDimension(name, n)
        r = nc.createVariable("r", ">f8", ("rt", "ry", "rx"), zlib=True, shuffle=False, chunksizes=(4, 200, 200),
                              endian="big")  # one chunk of 1.3 MB that hardly compresses: a body of many pieces
        r[:] = rng.random((4, 200, 200))
        g = nc.createVariable("g", "f4", ("t", "y", "x"), zlib=True, shuffle=False, chunksizes=CHUNKS)
        g[:] = rng.random(SHAPE, dtype=np.float32)
    store = tmp / "z.ncz"
    ncz.convert(str(path), str(store))
    # "g" re-encoded as gzip (numcodecs' GZip framing): the other deflate codec a chain may hold alone
    zarray_path = store / "g" / ".zarray"
    zarray = json.loads(zarray_path.read_text())
    zarray["compressor"] = {"id": "gzip", "level": 1}
    zarray_path.write_text(json.dumps(zarray))
    consolidated = store / ".zmetadata"
    if consolidated.exists():
        meta = json.loads(consolidated.read_text())
        meta["metadata"]["g/.zarray"] = zarray
        consolidated.write_text(json.dumps(meta))
    for chunk in (store / "g").iterdir():
        if not chunk.name.startswith("."):
            import gzip

            chunk.write_bytes(gzip.compress(zlib.decompress(chunk.read_bytes()), compresslevel=1))
    return path, store


def test_the_store_holds_deflate_only_chunks_of_each_type(deflated):
    """The precondition of every test below: each variable's storage is the streamed path's kind."""
    _, store = deflated
    for name, dtype in {**VARIABLES, "g": "<f4"}.items():
        zarray = json.loads((store / name / ".zarray").read_text())
        assert (zarray["dtype"], zarray["chunks"], zarray["shape"]) == (dtype, list(CHUNKS), list(SHAPE)), name
        assert zarray["filters"] in (None, []) and zarray["compressor"]["id"] == ("gzip" if name == "g" else "zlib")


KEYS = [np.s_[:, 7, 3], np.s_[:, 12, 10], np.s_[5, 2:11, 1:10], np.s_[2:9, 1:12, 4:10], np.s_[9, 12, 10],
        np.s_[1:9:3, 2:12:4, ::2], np.s_[...], np.s_[3:, 11:, 9:], np.s_[0:1, :, 5]]


@pytest.fixture
def whole_decode_refused(monkeypatch):
    """Any chunk decoded whole fails the test: the streamed path took them all."""
    def refused(*args, **kwargs):
        raise AssertionError("a chunk was decoded whole")

    monkeypatch.setattr(reader.ArrayInfo, "_decoded", refused)


@pytest.mark.parametrize("piece", [1 << 20, 64, 8], ids=["whole-chunk-pieces", "row-pieces", "element-pieces"])
def test_streamed_values_are_netcdf4s(deflated, monkeypatch, whole_decode_refused, piece):
    """Rows along the first axis (the default piece holds a chunk), along a later one, single elements."""
    import netCDF4

    monkeypatch.setattr(streamed, "PIECE_BYTES", piece)
    monkeypatch.setattr(directory, "READ_PIECE", 7)  # the file read a few bytes at a time as well
    fed: list[int] = []
    feed = streamed.StreamInflater.feed
    monkeypatch.setattr(streamed.StreamInflater, "feed", lambda self, data: (fed.append(len(data)), feed(self, data)))
    path, store = deflated
    with netCDF4.Dataset(path) as nc, ncz.open(str(store)) as ds:
        for name in [*VARIABLES, "g"]:
            for key in KEYS:
                got = np.asarray(ds[name][key])
                want = nc[name][key].data
                assert got.shape == want.shape and got.dtype.kind == want.dtype.kind, (name, key)
                np.testing.assert_array_equal(got, want, err_msg=f"{name}{key}")
    assert fed and max(fed) == 7  # the files' bytes came in pieces too


def test_pieces_cover_the_rows_they_hold(monkeypatch):
    """SelectedRows cuts the chunk at the first axis whose trailing extent fits a piece."""
    monkeypatch.setattr(streamed, "PIECE_BYTES", 64)
    rows = streamed.SelectedRows((4, 6, 5), 4, (slice(0, 4), slice(2, 3), slice(1, 4)))
    assert (rows.k, rows.tail, rows.row_bytes, rows.rows_per_piece) == (1, (5,), 20, 3)
    assert rows.rows.tolist() == [2, 8, 14, 20] and rows.last_row == 20


def damaged(store, name, stored: bytes):
    (store / name / "1.1.0").write_bytes(stored)


@pytest.mark.parametrize("how", ["corrupt", "truncated", "over-long", "short", "gzip-member"])  # 2 members: too long
def test_a_damaged_chunk_fails_with_the_whole_decodes_line(deflated, tmp_path, how):
    """The streamed read and the whole decode word a damaged chunk alike: one FormatError line naming it."""
    import shutil

    _, original = deflated
    store = tmp_path / "z.ncz"
    shutil.copytree(original, store)
    name = "g" if how == "gzip-member" else "f"
    good = (store / name / "1.1.0").read_bytes()
    size = int(np.prod(CHUNKS)) * 4
    stored = {"corrupt": good[:40] + bytes(b ^ 0x5A for b in good[40:80]) + good[80:],
              "truncated": good[:-9],
              "over-long": zlib.compress(bytes(size + 100)),
              "short": zlib.compress(bytes(size - 4)),
              "gzip-member": good + good}[how]
    damaged(store, name, stored)
    errors = []
    for stream in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not stream:
                patch.setattr(reader.ArrayInfo, "_streams", lambda *a: False)
            with ncz.open(str(store)) as ds:
                try:
                    ds[name][:, 7, 3]
                except FormatError as exc:
                    errors.append(str(exc))
                else:
                    errors.append("read")
    assert errors[0] == errors[1] and "\n" not in errors[0] and f"/{name}/1.1.0" in errors[0], errors


def test_a_chunk_larger_than_the_budget_is_refused_as_before(deflated, monkeypatch):
    _, store = deflated
    monkeypatch.setenv("NCZARR_MAX_IN_MEMORY", "100")
    with ncz.open(str(store)) as ds, pytest.raises(Exception, match="refusing to hold more than 100"):
        ds["f"][:, 7, 3]


@pytest.fixture
def http_root(deflated):
    """``http.server`` serving the store's directory on 127.0.0.1: the URL of the store."""
    _, store = deflated
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(store.parent))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{store.name}#mode=nczarr"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_body_is_inflated_as_it_streams(deflated, http_root, monkeypatch, whole_decode_refused):
    """Over HTTP a chunk a read takes little of comes in obstore's pieces, each fed to the inflater as it arrives;
    a chunk it takes whole is fetched in one request (streamed.WHOLE_SHARE) and fed as one piece, still never
    inflated whole; values are netCDF4's."""
    import netCDF4

    monkeypatch.setattr(remote, "PIECE", 4096)
    fed: list[int] = []
    feed = streamed.StreamInflater.feed

    def counted(self, data):
        fed.append(len(data))
        return feed(self, data)

    monkeypatch.setattr(streamed.StreamInflater, "feed", counted)
    path, store = deflated
    stored = (store / "r" / "0.0.0").stat().st_size
    with netCDF4.Dataset(path) as nc, ncz.open(http_root) as ds:
        for key in (np.s_[:, 70, 3], np.s_[2, 20:110, 10:190], np.s_[1:4:2, 2:200:4, ::3], np.s_[...]):
            np.testing.assert_array_equal(np.asarray(ds["r"][key]), nc["r"][key].data)
    assert stored > 1_000_000 and sum(fed) == 4 * stored
    assert max(fed[:-1]) < stored // 2 and fed[-1] == stored  # pieces for the three slivers, one body for all


def test_a_streamed_read_asks_for_threads_with_the_bytes_a_piece_holds(deflated, monkeypatch):
    """A sparse read of deflate-only chunks holds a piece per chunk in flight, not a chunk: read_threads is asked
    with the piece's bytes (a remote store then fetches more chunks at once); a whole read, with the chunk's."""
    asked: list[int] = []
    real = reader.read_threads

    def spy(store, held=0, output=0):
        asked.append(held)
        return real(store, held, output)

    from nczarr_conformance.nczarr import selection

    monkeypatch.setattr(selection, "read_threads", spy)
    monkeypatch.setattr(reader, "PIECE_BYTES", 64)
    chunk = int(np.prod(CHUNKS)) * 4  # f: <f4
    _, store = deflated
    with ncz.open(str(store)) as ds:
        ds["f"][:, 7, 3]
        ds["f"][0:8, 0:12, 0:10]  # eight whole chunks
    assert asked == [64, chunk]
