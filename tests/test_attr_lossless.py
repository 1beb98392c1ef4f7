"""The converter's default char-attribute form is read back exactly by netcdf-c (issue 14, part 4).

Appendix D case 3 (char text that parses as JSON written as that JSON) is read back by
netcdf-c 4.10.1 as one character: ``_Unsigned="true"`` → ``"1"``, so a ubyte variable
reads signed. The default (``--json-attributes=lossless``) writes the text as a JSON
string; ``--json-attributes=spec`` keeps the literal case-3 form. Expected values come
from netCDF4-python reading the source file; netCDF4-python (netcdf-c 4.10.1) reads the
output through ``file://…#mode=nczarr,file``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO, require_module
from tests.real_files import REAL, REAL_IDS, UNDEFINED

netCDF4 = require_module("netCDF4")

pytestmark = pytest.mark.peer

CHAR_ATTRS = {"t": "true", "v": "1.2", "n": "42", "a": "[1, 2]", "o": '{"a": 1}', "f": "false", "l": "[1,2]"}
#: Values netcdf-c reads differently from the source for reasons outside attributes (left to test_convert_valid).
VALUE_QUIRKS = {
    # HDF5 extent (2, 3) under netCDF dims (3, 3): netcdf-c reads the row past the extent as [--, 0, 0]
    ("bad_missing_data.nc", "/temp"),
}


def nczarr_url(path: Path) -> str:
    return f"file://{os.path.abspath(path)}#mode=nczarr,file"


def nc2nczarr(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def json_looking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """netCDF-4 file: global char attributes whose text parses as JSON, a byte variable with _Unsigned="true"."""
    path = tmp_path_factory.mktemp("lossless") / "json_looking.nc"
    with netCDF4.Dataset(str(path), "w", format="NETCDF4") as nc:
        for name, text in CHAR_ATTRS.items():
            nc.setncattr(name, text)  # a Python str: NC_CHAR
        nc.createDimension("x", 4)
        var = nc.createVariable("b", "i1", ("x",))
        var.setncattr("_Unsigned", "true")
        var.setncattr("version", "1.2")
        var.set_auto_maskandscale(False)
        var[:] = np.array([0, 1, -2, -1], dtype="i1")  # 0, 1, 254, 255 as ubyte
    return path


def attributes(nc: Any) -> dict[str, dict[str, Any]]:
    """Every attribute of every group and variable as netCDF4-python gives it (type and value)."""
    out: dict[str, dict[str, Any]] = {}

    def walk(group: Any, path: str) -> None:
        out[path] = {k: _plain(group.getncattr(k)) for k in group.ncattrs()}
        for vname, var in group.variables.items():
            out[f"{path}{vname}"] = {k: _plain(var.getncattr(k)) for k in var.ncattrs()}
        for gname, sub in group.groups.items():
            walk(sub, f"{path}{gname}/")

    walk(nc, "/")
    return out


def _plain(value: Any) -> Any:
    """(type, value) with NaN spelled "NaN" so that equal attributes compare equal."""
    def nan(x: Any) -> Any:
        return "NaN" if isinstance(x, float) and x != x else x

    if isinstance(value, np.ndarray):
        return (str(value.dtype), [nan(x) for x in value.tolist()])
    if isinstance(value, np.generic):
        return (str(value.dtype), nan(value.item()))
    return (type(value).__name__, value)


def values(nc: Any) -> dict[str, Any]:
    """Every variable's values as netCDF4-python reads them by default (_Unsigned, masks, scaling applied)."""
    out: dict[str, Any] = {}

    def walk(group: Any, path: str) -> None:
        for vname, var in group.variables.items():
            data = var[...]
            mask = np.ma.getmaskarray(data).tolist() if np.ma.isMaskedArray(data) else None
            out[f"{path}{vname}"] = (str(np.asarray(data).dtype), np.ma.getdata(data).tolist(), mask)
        for gname, sub in group.groups.items():
            walk(sub, f"{path}{gname}/")

    walk(nc, "/")
    return out


def read_both(src: Path, out: Path) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(str(src)) as a, netCDF4.Dataset(nczarr_url(out)) as b:
            return (attributes(a), attributes(b)), (values(a), values(b))


def test_default_is_read_back_exactly_by_netcdf_c(json_looking: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.file"
    nc2nczarr(str(json_looking), str(out))
    (src_attrs, out_attrs), (src_values, out_values) = read_both(json_looking, out)
    assert src_attrs["/"] == {k: ("str", v) for k, v in CHAR_ATTRS.items()}  # the source is what we meant
    assert out_attrs == src_attrs
    assert src_values["/b"][:2] == ("uint8", [0, 1, 254, 255])  # _Unsigned applied to the source
    assert out_values == src_values
    zattrs = json.loads((out / ".zattrs").read_text())
    assert {k: zattrs[k] for k in CHAR_ATTRS} == CHAR_ATTRS  # JSON strings, every one


def test_spec_option_writes_appendix_d_case_3(json_looking: Path, tmp_path: Path) -> None:
    out = tmp_path / "spec.file"
    nc2nczarr("--json-attributes=spec", str(json_looking), str(out))
    zattrs = json.loads((out / ".zattrs").read_text())
    assert {k: zattrs[k] for k in CHAR_ATTRS} == {
        "t": True, "v": 1.2, "n": 42, "f": False, "l": [1, 2], "o": {"a": 1},
        "a": "[1, 2]",  # would read back as "[1,2]": kept as text (see attrs.py)
    }
    assert zattrs["_nczarr_attr"]["types"]["t"] == ">S1"
    assert json.loads((out / "b" / ".zattrs").read_text())["_Unsigned"] is True
    # what the default avoids: netcdf-c 4.10.1 reads the case-3 form back as one character
    (_, out_attrs), (src_values, out_values) = read_both(json_looking, out)
    assert out_attrs["/b"]["_Unsigned"] == ("str", "1")
    assert out_values["/b"][1] != src_values["/b"][1]


def test_option_is_documented() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    help_text = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--help"],
                               capture_output=True, text=True, env=env, timeout=60).stdout
    assert "--json-attributes {lossless,spec}" in help_text
    assert "lossless (default)" in " ".join(help_text.split())


@pytest.mark.skipif(not REAL, reason="corpus/real holds no .nc file")
@pytest.mark.parametrize("src", REAL, ids=REAL_IDS)
def test_real_files_keep_every_attribute(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "real.file"
    nc2nczarr(str(src), str(out))
    (src_attrs, out_attrs), (src_values, out_values) = read_both(src, out)
    differing = [f"{where}:{name}: {src_attrs[where].get(name)!r} != {out_attrs.get(where, {}).get(name)!r}"
                 for where in src_attrs for name in src_attrs[where]
                 if src_attrs[where].get(name) != out_attrs.get(where, {}).get(name)]
    assert differing == []
    assert out_values.keys() == src_values.keys()
    for name in src_values:
        if (src.name, name) in VALUE_QUIRKS or name in UNDEFINED.get(src.name, ()):
            continue
        assert out_values[name][0] == src_values[name][0], name  # dtype after _Unsigned/scaling
        assert out_values[name][2] == src_values[name][2], name  # the mask
        np.testing.assert_array_equal(np.array(out_values[name][1]), np.array(src_values[name][1]), err_msg=name)
