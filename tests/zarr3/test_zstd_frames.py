"""zstd chunks as other encoders write them: frames without a declared size (the ``zstd`` command reading
a pipe, any streaming encoder), several frames in one chunk, a truncated frame.

numcodecs' own encoder always declares the size, so a store written by zarr-python alone never shows
these; the stores here are zarr-python's with each chunk re-encoded by the ``zstd`` command. Expected
values: zarr-python reading the same store (numcodecs decodes each form); a truncated frame is refused
by zarr-python as by us, and our refusal is one line naming the chunk.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from tests.conftest import require_tool

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
TEXT = np.array(["alpha", "beta", "γάμμα", "", "delta epsilon", "ζ"] * 50, dtype=object)
VALUES = np.arange(1200, dtype="<f8").reshape(40, 30)


def _streamed(data: bytes) -> bytes:
    """``data`` as one zstd frame written from a pipe: its header declares no content size."""
    frame = subprocess.run([require_tool("zstd"), "-q", "-c", "-3"], input=data, capture_output=True,
                           check=True).stdout
    import zstandard

    assert zstandard.frame_content_size(frame) == -1  # what the cases below rest on
    return frame


def _reencode(store: Path, array: str, how: str) -> list[Path]:
    """Every stored chunk of ``array`` decoded by numcodecs and written again as ``how`` says."""
    chunks = [p for p in (store / array).rglob("*") if p.is_file() and p.name not in ("zarr.json", ".zarray")]
    assert chunks
    for path in chunks:
        raw = numcodecs.Zstd().decode(path.read_bytes())
        if how == "streamed":
            path.write_bytes(_streamed(bytes(raw)))
        elif how == "two-frames":  # the first half as a sized frame, the rest streamed
            half = len(raw) // 2
            path.write_bytes(numcodecs.Zstd(level=1).encode(bytes(raw[:half])) + _streamed(bytes(raw[half:])))
        else:
            raise AssertionError(how)
    return chunks


def _v3_store(path: Path) -> Path:
    """A zarr-python 3 group: a string array (its decoded chunk size is not known before decoding, so the
    decoder's bound is the in-memory limit, far above the chunk) and a float array, both zstd."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    text = group.create_array("text", shape=TEXT.shape, chunks=(120,), dtype=str,
                              compressors=zarr.codecs.ZstdCodec(level=1))
    text[...] = TEXT
    floats = group.create_array("f", shape=VALUES.shape, chunks=(16, 30), dtype="<f8",
                                compressors=zarr.codecs.ZstdCodec(level=1))
    floats[...] = VALUES
    return path


@pytest.mark.parametrize("how", ["streamed", "two-frames"])
def test_zstd_chunks_read_as_zarr_python_reads_them(tmp_path: Path, how: str) -> None:
    store = _v3_store(tmp_path / "s.zarr")
    for array in ("text", "f"):
        _reencode(store, array, how)
    theirs = zarr.open_group(store, mode="r")
    assert [str(v) for v in theirs["text"][...]] == list(TEXT)  # numcodecs decodes both forms
    ours = open_dataset(str(store))
    assert list(ours.root.variables["text"].data) == [str(v) for v in theirs["text"][...]]
    np.testing.assert_array_equal(ours.root.variables["f"].data, theirs["f"][...])


def test_a_truncated_zstd_frame_is_one_line_naming_the_chunk(tmp_path: Path) -> None:
    store = _v3_store(tmp_path / "s.zarr")
    chunk = _reencode(store, "text", "streamed")[0]
    chunk.write_bytes(chunk.read_bytes()[:-6])
    with pytest.raises(Exception):  # noqa: B017  (zarr-python refuses it too, with numcodecs' error)
        zarr.open_group(store, mode="r")["text"][...]
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", str(store)], capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "truncated zstd frame" in lines[0] and "text/c/" in lines[0], lines[0]
