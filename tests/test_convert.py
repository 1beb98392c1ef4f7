"""The converter: compressed HDF5 chunks copied as they are, equal to the re-encoding path; progress."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.model import diff
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.source import read_source


def test_direct_copy_equals_reencoding(rich_nc, tmp_path):
    direct = convert(str(rich_nc), str(tmp_path / "d.file"))
    slow = convert(str(rich_nc), str(tmp_path / "s.file"), direct=False)
    assert direct.copied > 0 and slow.copied == 0
    a, b = DirectoryStore(tmp_path / "d.file"), DirectoryStore(tmp_path / "s.file")
    assert a.list_prefix("/") == b.list_prefix("/")
    assert diff(open_dataset(str(tmp_path / "d.file")), open_dataset(str(tmp_path / "s.file"))) == []
    assert diff(read_source(str(rich_nc)), open_dataset(str(tmp_path / "d.file")), ignore=CONTIGUOUS) == []


def test_progress_bar_only_when_asked_and_summary_unless_quiet(rich_nc, tmp_path):
    cli = [sys.executable, "-m", "nczarr_conformance.cli.convert"]
    shown = subprocess.run([*cli, "--progress", str(rich_nc), str(tmp_path / "p.file")], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and "nc2nczarr:" in shown.stderr and "%" in shown.stderr
    plain = subprocess.run([*cli, str(rich_nc), str(tmp_path / "n.file")], capture_output=True, text=True, timeout=120)
    assert "%" not in plain.stderr and "objects" in plain.stderr  # not a terminal: no bar, a summary line
    quiet = subprocess.run([*cli, "--quiet", str(rich_nc), str(tmp_path / "q.file")], capture_output=True, text=True,
                           timeout=120)
    assert quiet.stderr == ""


def _undecodable(real, pipeline, plan):
    return lambda index: b"x\x9c" + b"\x00" * 8


def _decodes_to_other_values(real, pipeline, plan):
    """A well-formed chunk under the plan's codecs whose values are the source's plus one in every byte."""
    import numpy as np

    def read(index):
        payload = real(index)
        if not payload:
            return payload
        raw = np.frombuffer(pipeline.decode(payload), dtype=np.uint8)
        return pipeline.encode(np.frombuffer((raw + 1).tobytes(), dtype=plan.storage).reshape(plan.chunks))
    return read


@pytest.mark.parametrize("lie", [_undecodable, _decodes_to_other_values], ids=["undecodable", "other-values"])
def test_a_copied_chunk_that_does_not_decode_to_the_source_disables_copying(rich_nc, tmp_path, lie):
    """The first copied chunk of each variable is decoded and compared with the source; a wrong one
    makes the converter re-encode that variable. Both ways a copy can be wrong: bytes no codec
    decodes (the decode fails), and a valid chunk of other values (only the comparison sees it)."""
    from nczarr_conformance.codecs import Pipeline
    from nczarr_conformance.conversion.from_netcdf import _header
    from nczarr_conformance.model import Dataset
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.sources import netcdf4
    from nczarr_conformance.sources.hdf5_chunks import DirectChunks
    from nczarr_conformance.stores import DirectoryStore as Dir

    class Lying(DirectChunks):
        def __call__(self, plan):  # type: ignore[override]
            real = super().__call__(plan)
            if real is None:
                return None
            return lie(real, Pipeline(plan.compressor, plan.filters, plan.storage.itemsize), plan)

    nc = netcdf4.open_nc(str(rich_nc))
    try:
        variables: dict = {}
        model = Dataset(_header(nc, "/", variables))
        lying = Lying(str(rich_nc))
        with Dir(tmp_path / "l.file", "w") as store:
            copied = write_dataset(model, store, source=lambda k, v, r: netcdf4.read_values(variables[k], r or None),
                                   raw=lying)
        lying.close()
    finally:
        netcdf4.close_nc(nc)
    assert copied == 0
    assert diff(read_source(str(rich_nc)), open_dataset(str(tmp_path / "l.file")), ignore=CONTIGUOUS) == []


def test_cli_default_flavor_with_mode_zarr_url_writes_pure_zarr(tmp_path):
    """nczarr.md and netcdf-c agree: ``mode=zarr`` is pure Zarr, no NCZarr keys anywhere; the CLI's
    default flavor name ("nczarr") must not override what the URL asks for."""
    import netCDF4

    src = tmp_path / "in.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("v", "i4", ("x",))[:] = [1, 2, 3]
    out = tmp_path / "out.file"
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", str(src),
                             f"file://{out}#mode=zarr,file"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    texts = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert "v/.zarray" in texts
    assert not [k for k, b in texts.items() if b"_nczarr" in b or b"_NCZARR" in b], sorted(texts)


def test_a_sample_chunk_is_compared_on_a_slab_of_leading_rows_not_whole(tmp_path):
    """The copied-chunk check compares its sample with the source on a slab, "so a big chunk's values are not read,
    converted and compared in full" (writer._raw_copy_verified): the smallest stored chunk's first rows, as many as
    hold VERIFY_SLAB_BYTES (1 MiB), once for the variable's codec chain. Chunks of (1024, 512) floats have 2048-byte
    rows: 512 rows, whatever column the chunk starts at; which chunk is smallest, h5py's chunk index says."""
    import netCDF4
    import numpy as np

    from nczarr_conformance.conversion.from_netcdf import _header
    from nczarr_conformance.model import Dataset
    from nczarr_conformance.nczarr.writer import VERIFY_SLAB_BYTES, write_dataset
    from nczarr_conformance.sources import netcdf4
    from nczarr_conformance.sources.hdf5_chunks import DirectChunks

    path = tmp_path / "wide.nc"
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("y", 1024)
        nc.createDimension("x", 1024)
        v = nc.createVariable("v", "f4", ("y", "x"), chunksizes=(1024, 512), zlib=True, complevel=1)
        v[:] = np.arange(1024 * 1024, dtype="f4").reshape(1024, 1024)
    read: list[tuple[slice, ...]] = []
    nc = netcdf4.open_nc(str(path))
    try:
        variables: dict = {}
        model = Dataset(_header(nc, "/", variables))

        def source(key, var, region):
            read.append(region)
            return netcdf4.read_values(variables[key], region or None)

        raw = DirectChunks(str(path))
        with DirectoryStore(tmp_path / "w.file", "w") as store:
            copied = write_dataset(model, store, source=source, raw=raw)
        raw.close()
    finally:
        netcdf4.close_nc(nc)
    rows = VERIFY_SLAB_BYTES // (512 * 4)
    column = _smallest_stored(path, "v")[1][1]
    assert copied == 2 and rows == 512
    assert read == [(slice(0, rows), slice(column, column + 512))]


def _smallest_stored(path, name):
    """(size, element offset) of the smallest chunk HDF5 stored for ``name``, from h5py's own chunk index."""
    import h5py

    with h5py.File(path, "r") as f:
        dataset = f[name]
        return min((info.size, tuple(info.chunk_offset))
                   for info in (dataset.id.get_chunk_info(i) for i in range(dataset.id.get_num_chunks())))


def _shared_chain_file(path, *, zeros=False):
    """a and b: float32 with HDF5 shuffle + deflate 1 (one codec chain) in chunks of other shapes; c: float64 with
    deflate alone (another chain). a's second chunk is a ramp (compresses best), or with ``zeros`` all zeros."""
    import netCDF4
    import numpy as np

    rng = np.random.default_rng(7)
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("t", 8)
        nc.createDimension("x", 256)
        a = nc.createVariable("a", "f4", ("t", "x"), chunksizes=(4, 256), zlib=True, complevel=1, shuffle=True)
        b = nc.createVariable("b", "f4", ("t", "x"), chunksizes=(2, 64), zlib=True, complevel=1, shuffle=True)
        c = nc.createVariable("c", "f8", ("t", "x"), chunksizes=(8, 128), zlib=True, complevel=1, shuffle=False)
        second = np.zeros((4, 256)) if zeros else np.tile(np.arange(256) / 256, (4, 1))
        a[:] = np.concatenate([rng.random((4, 256)), second]).astype("f4")
        b[:] = rng.random((8, 256)).astype("f4")
        c[:] = rng.random((8, 256))


def test_a_codec_chain_shared_by_variables_is_verified_once_on_its_smallest_stored_chunk(tmp_path, monkeypatch):
    """One decode-and-compare per codec chain (HDF5 filters and parameters, type, byte order), on the chain's
    smallest stored chunk (h5py's chunk index says which): a and b share one, c has its own, so two samples, and
    every stored chunk is still copied and reads as the source."""
    from nczarr_conformance.nczarr.writer import DatasetWriter

    src = tmp_path / "shared.nc"
    _shared_chain_file(src)
    sampled: list[tuple[str, int]] = []
    real = DatasetWriter._sample_matches

    def counted(self, plan, pipeline, payload, *args, **kw):
        sampled.append((plan.key, len(payload)))
        return real(self, plan, pipeline, payload, *args, **kw)

    monkeypatch.setattr(DatasetWriter, "_sample_matches", counted)
    stats = convert(str(src), str(tmp_path / "out.file"))
    f4 = min(_smallest_stored(src, "a")[0], _smallest_stored(src, "b")[0])
    assert sorted(size for _, size in sampled) == sorted([f4, _smallest_stored(src, "c")[0]]), sampled
    assert stats.copied == 2 + 4 * 4 + 2  # a: 2 chunks, b: 16, c: 2
    assert diff(read_source(str(src)), open_dataset(str(tmp_path / "out.file")), ignore=CONTIGUOUS) == []


def test_a_codec_mismatch_on_a_shared_chain_re_encodes_every_variable_of_it(tmp_path, monkeypatch):
    """The guarantee kept: a real file (a and b: HDF5 shuffle + deflate) read by a mapping made wrong (it sees no
    shuffle filter and plans zlib alone, so a copied chunk decodes to shuffled bytes). The chain's smallest chunk
    is a's zeros, the same bytes shuffled or not: it tells nothing, so the next smallest is compared, fails, and
    then no chunk of a or b is copied: both are re-encoded and read as the source; c (deflate alone, where the
    wrong mapping is right) is still copied."""
    from nczarr_conformance.nczarr.writer import DatasetWriter
    from nczarr_conformance.sources.hdf5_chunks import H5Z_FILTER_SHUFFLE, DirectChunks

    src = tmp_path / "shared.nc"
    _shared_chain_file(src, zeros=True)
    real_codecs, real_filters = DatasetWriter._codecs, DirectChunks._filters
    monkeypatch.setattr(DatasetWriter, "_codecs",
                        staticmethod(lambda akey, var, itemsize: (real_codecs(akey, var, itemsize)[0], None)))
    monkeypatch.setattr(DirectChunks, "_filters",
                        lambda self, dataset: [f for f in real_filters(self, dataset) if f != H5Z_FILTER_SHUFFLE])
    sampled: list[str] = []
    real = DatasetWriter._sample_matches

    def counted(self, plan, *args, **kw):
        sampled.append(plan.key)
        return real(self, plan, *args, **kw)

    monkeypatch.setattr(DatasetWriter, "_sample_matches", counted)
    stats = convert(str(src), str(tmp_path / "out.file"))
    assert len([k for k in sampled if k in ("/a", "/b")]) == 2, sampled
    assert stats.copied == 2  # c's two chunks only
    found = diff(read_source(str(src)), open_dataset(str(tmp_path / "out.file")), ignore=CONTIGUOUS)
    assert [d for d in found if not d.startswith(("/root/variables/a/filters:", "/root/variables/b/filters:"))] == []


@pytest.mark.parametrize("chunk_rows", [1, 256], ids=["4KiB-chunks", "1MiB-chunks"])
def test_small_chunks_copied_into_a_directory_start_no_thread_pool(tmp_path, monkeypatch, chunk_rows):
    """Chunks copied file to file are file creations in one directory: threads only contend on them in the kernel,
    so chunks under SERIAL_COPY_BYTES unencoded are copied on the calling thread; bigger ones keep the pool (two
    of them here: a variable of one chunk has nothing to overlap and starts none either, tests/nczarr/test_writer.py).
    Either way every chunk is copied and the store reads as the source."""
    import netCDF4
    import numpy as np

    from nczarr_conformance.nczarr import writer

    src = tmp_path / "in.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("t", 512)
        nc.createDimension("x", 1024)
        v = nc.createVariable("v", "f4", ("t", "x"), chunksizes=(chunk_rows, 1024), zlib=True, complevel=1)
        v[:] = np.tile(np.arange(1024, dtype="f4"), (512, 1))
    pools: list[int] = []
    real = writer.ThreadPoolExecutor

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kw):
            pools.append(1)
            super().__init__(*args, **kw)

    monkeypatch.setattr(writer, "ThreadPoolExecutor", Counted)
    stats = convert(str(src), str(tmp_path / "out.file"), threads=4)
    assert stats.copied == 512 // chunk_rows
    assert len(pools) == (0 if chunk_rows * 1024 * 4 < writer.SERIAL_COPY_BYTES else 1)
    assert diff(read_source(str(src)), open_dataset(str(tmp_path / "out.file")), ignore=CONTIGUOUS) == []


@pytest.mark.parametrize("lie", [None, _undecodable, _decodes_to_other_values], ids=["true", "undecodable", "other"])
def test_a_big_sample_is_decoded_on_another_thread_and_still_judged(tmp_path, monkeypatch, lie):
    """A sample of VERIFY_BYTES or more is decoded on a thread of its own while netCDF4 reads the slab (both
    decompress); its verdict is unchanged: a true chunk is copied, an undecodable one or one of other values
    makes the variable re-encoded, and the store reads as the source either way."""
    import threading

    import netCDF4
    import numpy as np
    import zarr

    from nczarr_conformance.codecs import Pipeline
    from nczarr_conformance.nczarr.writer import VERIFY_BYTES
    from nczarr_conformance.sources import hdf5_chunks

    src = tmp_path / "big.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("t", 1024)
        nc.createDimension("x", 1024)
        v = nc.createVariable("v", "f4", ("t", "x"), chunksizes=(1024, 1024), zlib=True, complevel=1)
        v[:] = np.tile(np.arange(1024, dtype="f4"), (1024, 1))
    assert VERIFY_BYTES <= 1024 * 1024 * 4
    decoded_on: list[str] = []
    real_decode = Pipeline.decode

    def decode(self, raw, limit=None):
        decoded_on.append(threading.current_thread().name)
        return real_decode(self, raw, limit)

    monkeypatch.setattr(Pipeline, "decode", decode)
    if lie is not None:
        real_call = hdf5_chunks.DirectChunks.__call__

        def lying(self, plan):
            real = real_call(self, plan)
            return None if real is None else lie(real, Pipeline(plan.compressor, plan.filters,
                                                                plan.storage.itemsize), plan)
        monkeypatch.setattr(hdf5_chunks.DirectChunks, "__call__", lying)
    stats = convert(str(src), str(tmp_path / "out.file"), threads=4)
    assert decoded_on and threading.main_thread().name not in decoded_on[-1:], decoded_on
    assert stats.copied == (1 if lie is None else 0)
    with netCDF4.Dataset(str(src)) as nc:
        expected = nc["v"][:].data
    assert np.array_equal(zarr.open_group(str(tmp_path / "out.file"), mode="r")["v"][:], expected)
