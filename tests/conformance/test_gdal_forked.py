"""Issue #26: the GDAL peer reads each store through GDAL's Python bindings in a fork of a server that loaded
libgdal once (peers/gdal_mdiminfo.py), instead of starting gdalmdiminfo per store. The expected values are
gdalmdiminfo's own (the tool, started per store): exit status, JSON and ERROR lines must be the same."""
from __future__ import annotations

import json
import subprocess

from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.conformance.matrix import _write_one
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.command import forked_call
from tests.conftest import require_tool


def _said(returncode: int, out: str, err: str) -> tuple[int, object, list[str], str]:
    lines = [line for line in err.splitlines() if line.strip()]
    return (returncode, json.loads(out) if out.strip() else None,
            [line for line in lines if line.startswith("ERROR")], lines[0] if lines else "")


def test_the_forked_bindings_say_what_gdalmdiminfo_says_on_every_store(tmp_path):
    require_tool("gdalmdiminfo")
    from nczarr_conformance.peers import implementations  # noqa: F401  (registers the peers)

    gdal = PEERS["gdal"]
    urls = []
    for writer in ("ours-zarr", "ours-zarr-v3", "netcdf-c-corpus", "ours"):
        for case in CASES:
            written = _write_one(case, PEERS[writer], None, tmp_path)
            if written.url is not None:
                urls.append(written.url)
    urls.append(str(tmp_path / "missing"))
    assert forked_call(gdal.bindings, ("osgeo.gdal",), [gdal.script, urls[0]], 60) is not None, (  # type: ignore[attr-defined]
        f"GDAL's Python bindings do not import under {gdal.bindings} (Debian python3-gdal)")  # type: ignore[attr-defined]
    failed = 0
    for url in urls:
        tool = subprocess.run(["gdalmdiminfo", "-detailed", url], check=False, capture_output=True, text=True)
        expected = _said(tool.returncode, tool.stdout, tool.stderr)
        assert _said(*gdal._mdiminfo(url)) == expected, url  # type: ignore[attr-defined]
        failed += expected[0] != 0 or bool(expected[2])
    assert failed >= 2 and len(urls) >= 40  # stores it reads, and ones it refuses or complains about
