"""We read every form netcdf-c has written (issue 14, part 2).

Each case is a store as netcdf-c writes it; the expected reading is netcdf-c's own
(netCDF4-python on netcdf-c 4.10.1, or the CDL baseline netcdf-c ships with the store),
never our reader's.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.checker import check
from nczarr_conformance.stores.zip import ZipStore
from tests.conftest import NETCDF_C_CORPUS, REPO, require_module

netCDF4 = require_module("netCDF4")


def nczarr_url(path: Path) -> str:
    return f"file://{os.path.abspath(path)}#mode=nczarr,file"


def cli(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{tool}", *args], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture
def two_vars(tmp_path: Path) -> Path:
    """netcdf-c 4.10.1's store: v (shuffle + zlib 4) and w (no codec), 4 ints each."""
    path = tmp_path / "c.file"
    with netCDF4.Dataset(nczarr_url(path), "w") as nc:
        nc.createDimension("x", 4)
        v = nc.createVariable("v", "i4", ("x",), zlib=True, shuffle=True, complevel=4)
        v[:] = np.arange(4) * 1000
        w = nc.createVariable("w", "i4", ("x",))
        w[:] = np.arange(4) * 10
    return path


def set_codecs(store: Path, var: str, compressor: Any, filters: Any) -> None:
    path = store / var / ".zarray"
    zarray = json.loads(path.read_text())
    zarray["compressor"], zarray["filters"] = compressor, filters
    path.write_text(json.dumps(zarray))


# ---- codec parameters as strings (netcdf-c 4.9.2 / 4.9.3, netcdf-c issue #3200) ----------------------

@pytest.mark.peer
def test_string_codec_parameters_read_as_netcdf_c_reads_them(two_vars: Path) -> None:
    original = json.loads((two_vars / "v" / ".zarray").read_text())
    assert original["compressor"] == {"id": "zlib", "level": 4}  # what 4.10.1 writes; 4.9.2/4.9.3 quoted it
    assert original["filters"] == [{"id": "shuffle", "elementsize": 0}]
    set_codecs(two_vars, "v", {"id": "zlib", "level": "4"}, [{"id": "shuffle", "elementsize": "0"}])
    with netCDF4.Dataset(nczarr_url(two_vars)) as nc:
        expected = nc["v"][:].tolist()
    assert expected == [0, 1000, 2000, 3000]
    assert open_dataset(str(two_vars)).root.variables["v"].data.tolist() == expected
    done = cli("dump", str(two_vars))
    assert done.returncode == 0, done.stderr
    assert "v = 0, 1000, 2000, 3000 ;" in done.stdout


# ---- netcdf-c's invalid JSON: ref_jsonconvention.zmap (nczarr_test/run_jsonconvention.sh) -------------------

def store_from_zmap(zmap: Path, out: Path) -> Path:
    """The metadata objects a netcdf-c ``.zmap`` listing holds, as a directory store (chunks are not listed)."""
    for line in zmap.read_text().splitlines():
        m = re.fullmatch(r"\[\d+\] (\S+) : \(\) \|(.*)\|", line)
        if m:
            target = out / m.group(1).lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(m.group(2))
    return out


def cdl_attributes(cdl: Path) -> dict[str, str]:
    """``var:name = "text" ;`` char attributes of a CDL baseline, unescaped."""
    found = re.findall(r'^\s*(\w*):(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*;', cdl.read_text(), flags=re.M)
    return {f"{var}:{name}": re.sub(r"\\(.)", r"\1", text) for var, name, text in found}


@pytest.fixture
def jsonconvention(tmp_path: Path) -> Path:
    return store_from_zmap(NETCDF_C_CORPUS / "ref_jsonconvention.zmap", tmp_path / "ref_jsonconvention.file")


def test_jsonconvention_zmap_is_not_json_but_reads_as_its_cdl(jsonconvention: Path) -> None:
    raw = (jsonconvention / "v" / ".zattrs").read_text()
    with pytest.raises(ValueError):
        json.loads(raw)  # "varjson3": [0.,0.,1.] as netcdf-c wrote it
    expected = cdl_attributes(NETCDF_C_CORPUS / "ref_jsonconvention.cdl")
    assert expected["v:varjson3"] == "[0.,0.,1.]"
    root = open_dataset(str(jsonconvention)).root
    got = {f"v:{k}": a.value for k, a in root.variables["v"].attributes.items() if a.type == "char"}
    got.update({f":{k}": a.value for k, a in root.attributes.items() if a.type == "char"})
    assert got == expected


@pytest.mark.peer
def test_jsonconvention_zmap_reads_as_netcdf_c_reads_it(jsonconvention: Path) -> None:
    with netCDF4.Dataset(nczarr_url(jsonconvention)) as nc:
        expected = {k: nc["v"].getncattr(k) for k in nc["v"].ncattrs()}
    got = {k: a.value for k, a in open_dataset(str(jsonconvention)).root.variables["v"].attributes.items()}
    assert got == expected



@pytest.mark.peer
def test_non_json_numbers_in_compact_zattrs_read_as_netcdf_c_reads_them(jsonconvention: Path) -> None:
    """The same tolerance without the spaces netcdf-c puts between members: a string ends at its closing quote
    only, so ``"a":[0.,1.]`` still has a number to tolerate after it, and ``1.`` inside ``"x 1. y"`` stays text."""
    compact = ('{"varjson3":[0.,0.,1.],"spaced":"x 1. y","_ARRAY_DIMENSIONS":["d1"],'
               '"_nczarr_array":{"dimension_references":["/d1"],"storage":"chunked"},'
               '"_nczarr_attr":{"types":{"varjson3":">S1","spaced":">S1","_nczarr_array":"|J0","_nczarr_attr":"|J0"}}}')
    (jsonconvention / "v" / ".zattrs").write_text(compact)
    with netCDF4.Dataset(nczarr_url(jsonconvention)) as nc:
        expected = {k: nc["v"].getncattr(k) for k in nc["v"].ncattrs()}
    assert expected == {"varjson3": "[0.,0.,1.]", "spaced": "x 1. y"}
    got = {k: a.value for k, a in open_dataset(str(jsonconvention)).root.variables["v"].attributes.items()}
    assert got == expected

def test_jsonconvention_zmap_dumps(jsonconvention: Path) -> None:
    done = cli("dump", str(jsonconvention))
    assert done.returncode == 0, done.stderr
    assert 'v:varjson3 = "[0.,0.,1.]" ;' in done.stdout


def test_jsonconvention_zmap_is_one_finding(jsonconvention: Path) -> None:
    report = check(str(jsonconvention))
    errors = [f for f in report.findings if str(f.severity) == "error"]
    assert [(f.rule, f.key) for f in errors] == [("NCZ-JSON-SYNTAX", "/v/.zattrs")]
    assert [f.rule for f in report.findings if f.key == "/v/.zattrs"] == ["NCZ-JSON-SYNTAX"]


# ---- a codec this machine lacks: netcdf-c lists the variable, fails its data (run_filter_errors.sh) ----------

@pytest.mark.peer
def test_unknown_codec_fails_only_that_variables_data_in_netcdf_c(two_vars: Path, capfd: pytest.CaptureFixture[str]
                                                                  ) -> None:
    set_codecs(two_vars, "v", {"id": "nosuchcodec", "level": 4}, None)
    with netCDF4.Dataset(nczarr_url(two_vars)) as nc:
        assert list(nc.variables) == ["v", "w"]
        assert nc["w"][:].tolist() == [0, 10, 20, 30]
        with pytest.raises(RuntimeError, match="undefined filter"):
            nc["v"][:]
    assert "Variable 'v' has unsupported codec: (nosuchcodec)" in capfd.readouterr().err  # netcdf-c's own line


@pytest.mark.parametrize("codec", [{"id": "nosuchcodec", "level": 4}, {"id": "szip", "mask": 4,
                                                                       "pixels-per-block": 32}])
def test_codec_we_lack_fails_only_that_variables_data(two_vars: Path, codec: dict[str, Any]) -> None:
    set_codecs(two_vars, "v", codec, None)
    header = cli("dump", "-h", str(two_vars))
    assert header.returncode == 0, header.stderr
    assert "int v(x) ;" in header.stdout and "int w(x) ;" in header.stdout
    other = cli("dump", "-v", "w", str(two_vars))
    assert other.returncode == 0, other.stderr
    assert "w = 0, 10, 20, 30 ;" in other.stdout
    data = cli("dump", str(two_vars))
    assert data.returncode == 2
    lines = data.stderr.splitlines()
    assert len(lines) == 1 and "/v" in lines[0] and repr(codec["id"]) in lines[0], data.stderr
    assert "Traceback" not in data.stderr


# ---- zip root: the first segment of entry 0, as netcdf-c's zmap_zip.c ---------------------------------------

ZARRAY = json.dumps({"zarr_format": 2, "shape": [3], "dtype": "<i4", "chunks": [3], "fill_value": 0, "order": "C",
                     "compressor": None, "filters": None})


def make_zip(path: Path, entries: list[tuple[str, bytes | str]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def nested(prefix: str, title: str) -> list[tuple[str, bytes | str]]:
    return [(f"{prefix}.zgroup", '{"zarr_format": 2}'), (f"{prefix}.zattrs", json.dumps({"title": title})),
            (f"{prefix}v/.zarray", ZARRAY), (f"{prefix}v/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"]})),
            (f"{prefix}v/0", np.arange(3, dtype="<i4").tobytes())]


def test_zip_entry0_at_top_level_roots_there_even_with_a_folder(tmp_path: Path) -> None:
    # entry 0 is a top-level object; the only group marker is in name/: netcdf-c roots at the top
    path = make_zip(tmp_path / "top.zip", [(".zattrs", json.dumps({"title": "top"})), *nested("name/", "inner")])
    with ZipStore(path) as store:
        assert store.prefix == "/"
        assert store.get("/.zattrs") is not None


def test_zip_entry0_in_a_folder_roots_in_that_folder(tmp_path: Path) -> None:
    # entry 0 is name/.zgroup, and the zip also holds top-level markers: netcdf-c roots in name/
    path = make_zip(tmp_path / "other.zip", nested("name/", "inner") + nested("", "top"))
    with ZipStore(path) as store:
        assert store.prefix == "/name/"
    assert open_dataset(str(path)).root.attributes["title"].value == "inner"

