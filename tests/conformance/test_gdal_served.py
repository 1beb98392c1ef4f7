"""Issue #26: the GDAL peer reads each store through a long-lived worker of GDAL's Python bindings
(peers/gdal_serve.py) instead of starting gdalmdiminfo per store. The expected values are gdalmdiminfo's own
(the tool, started per store): exit status, JSON and every stderr line must be the same, on every store the
report writes and on stores GDAL refuses or complains about."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.conformance.matrix import _write_one
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.gdal_peer import Gdal
from tests.conftest import require_tool


def _said(status: int | None, out: str, err: str) -> tuple[int | None, object, list[str]]:
    return status, json.loads(out) if out.strip() else None, [line for line in err.splitlines() if line.strip()]


@pytest.fixture
def gdal() -> Gdal:
    require_tool("gdalmdiminfo")
    peer = Gdal()
    assert peer._workers() is not None, (
        f"GDAL's Python bindings do not import under {peer.bindings} (Debian python3-gdal): the peer would "
        "start gdalmdiminfo per store")
    yield peer
    peer.close()


def test_the_served_bindings_say_what_gdalmdiminfo_says_on_every_store(tmp_path, gdal):
    urls = []
    for writer in ("ours-zarr", "ours-zarr-v3", "netcdf-c-corpus", "ours"):
        for case in CASES:
            written = _write_one(case, PEERS[writer], None, tmp_path)
            if written.url is not None:
                urls.append(written.url)
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / ".zgroup").write_text('{"zarr_format": 2}')
    (hostile / "a").mkdir()
    (hostile / "a" / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<f4", "compressor": {"id": "zlib", "level": 1},
        "fill_value": None, "filters": None, "order": "C"}))
    (hostile / "a" / "0").write_bytes(b"not zlib at all")
    urls += [str(hostile), str(tmp_path / "missing")]
    failed = complained = 0
    for url in urls:
        tool = subprocess.run(["gdalmdiminfo", "-detailed", url], check=False, capture_output=True, text=True)
        expected = _said(tool.returncode, tool.stdout, tool.stderr)
        assert _said(*gdal.mdiminfo(url)) == expected, url
        failed += expected[0] != 0
        complained += expected[0] == 0 and bool(expected[2])
    # stores it reads, ones it refuses and ones it reads with errors, all said alike
    assert failed >= 1 and complained >= 1 and len(urls) >= 40


def test_one_worker_answers_many_stores(tmp_path, gdal):
    written = [_write_one(case, PEERS["ours-zarr"], None, tmp_path).url for case in CASES[:5]]
    for url in written:
        assert url is not None
        gdal.read(url)
    pool = gdal._workers()
    assert pool is not None
    idle = pool._idle.qsize()
    assert idle == 1  # reads one after another share one worker: libgdal loaded once


def test_a_worker_that_dies_fails_that_read_as_the_tool_s_death_and_the_next_read_starts_another(tmp_path, gdal):
    url = _write_one(CASES[0], PEERS["ours-zarr"], None, tmp_path).url
    assert url is not None
    gdal.read(url)
    pool = gdal._workers()
    assert pool is not None
    worker = pool._idle.get_nowait()
    os.kill(worker.proc.pid, signal.SIGKILL)
    worker.proc.wait()
    pool._idle.put(worker)
    gdal.read(url)  # a dead idle worker is replaced before the read
    pool.close()
    served = pool.argv
    pool.argv = [gdal.bindings, "-c", "import os, sys; sys.stdin.readline(); os.kill(os.getpid(), 9)"]
    with pytest.raises(RuntimeError, match=r"^gdalmdiminfo exit -9: the serve worker ended without a reply$"):
        gdal.read(url)  # dies while answering: the read fails as the tool's death would
    pool.argv = served
    gdal.read(url)
