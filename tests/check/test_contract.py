"""The check contract on hostile stores built by hand: every fault our reader would refuse or misread is an
error finding (exit 1), never exit 0, never exit 2; exit 2 only when the store cannot be opened at all;
the same fault gives the same finding id, severity and key in a directory, a zip and on S3.

Where a fault's severity rests on a peer, the peer is run on the same store (zarr-python, xarray,
TensorStore, our own nczarr-dump).
"""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from nczarr_conformance.cli import check as check_cli
from nczarr_conformance.cli import dump as dump_cli
from tests.check.test_check import REPORT_SCHEMA
from tests.conftest import require_module
from tests.in_process import run_main

Objects = dict[str, bytes]


def j(doc: object) -> bytes:
    return json.dumps(doc).encode()


def zarray(shape: list[int], dtype: str = "<f8", fill: object = "NaN") -> dict[str, object]:
    return {"zarr_format": 2, "shape": shape, "chunks": shape, "dtype": dtype, "compressor": None,
            "fill_value": fill, "order": "C", "filters": None}


def base() -> Objects:
    """A valid pure Zarr v2 store, written by hand: one float64 array a(x) of 3 values."""
    return {"/.zgroup": j({"zarr_format": 2}), "/.zattrs": j({}),
            "/a/.zarray": j(zarray([3])), "/a/.zattrs": j({"_ARRAY_DIMENSIONS": ["x"]}),
            "/a/0": np.arange(3, dtype="<f8").tobytes()}


def deep_json() -> Objects:
    objs = base()
    objs["/a/.zattrs"] = b'{"_ARRAY_DIMENSIONS": ["x"], "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return objs


def nan_fill() -> Objects:
    objs = base()
    objs["/a/.zarray"] = objs["/a/.zarray"].replace(b'"fill_value": "NaN"', b'"fill_value": NaN')
    assert b"NaN," in objs["/a/.zarray"]
    return objs


def stale_zmetadata() -> Objects:
    objs = base()
    meta = {k.lstrip("/"): json.loads(v) for k, v in objs.items() if k.rsplit("/", 1)[-1].startswith(".z")}
    meta["a/.zarray"]["shape"] = meta["a/.zarray"]["chunks"] = [4]
    objs["/.zmetadata"] = j({"zarr_consolidated_format": 1, "metadata": meta})
    return objs


def dim_conflict() -> Objects:
    objs = base()
    objs["/b/.zarray"] = j(zarray([4]))
    objs["/b/.zattrs"] = j({"_ARRAY_DIMENSIONS": ["x"]})
    objs["/b/0"] = np.zeros(4, "<f8").tobytes()
    return objs


def bad_json() -> Objects:
    objs = base()
    objs["/a/.zarray"] = b'{"zarr_format": 2, "shape": [3'
    return objs


def backslash_name() -> Objects:
    objs = base()
    objs["/a\\b"] = b"x"
    return objs


#: fault -> (objects, expected (rule, severity, key), exit code)
FAULTS = {
    "deep-json": (deep_json, ("NCZ-JSON-DEPTH", "error", "/a/.zattrs"), 1),
    "nan-fill": (nan_fill, ("NCZ-JSON-NAN", "error", "/a/.zarray"), 1),
    "stale-zmetadata": (stale_zmetadata, ("NCZ-CONSOLIDATED-MATCH", "error", "/.zmetadata"), 1),
    "dim-conflict": (dim_conflict, ("NCZ-XARRAY-DIMSIZE", "error", "/b/.zattrs"), 1),
    "bad-json": (bad_json, ("NCZ-JSON-SYNTAX", "error", "/a/.zarray"), 1),
    "backslash-name": (backslash_name, ("NCZ-STORE-UNSAFE", "error", None), 1),
}


# ---- putting a hand-built store into a directory, a zip, a bucket ---------------------------

def to_dir(objs: Objects, path: Path) -> str:
    for key, data in objs.items():
        target = path.joinpath(*key.strip("/").split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(path)


def to_zip(objs: Objects, path: Path) -> str:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for key, data in objs.items():
            zf.writestr(key.lstrip("/"), data)
    return str(path)


def to_s3(objs: Objects, bucket: str, prefix: str) -> str:
    import boto3

    client = boto3.client("s3")
    for key, data in objs.items():
        client.put_object(Bucket=bucket, Key=f"{prefix}{key}", Body=data)
    return f"s3://{bucket}/{prefix}#mode=zarr,s3"


Found = list[tuple[str, str, str | None]]


def check(capfd: Any, url: str, *flags: str) -> tuple[int, Found, str]:
    """``nczarr-check --format json FLAGS URL``: its exit code, findings and stderr. In this process (its main(),
    Python's default warnings shown in its stderr: tests/in_process.py) unless ``capfd`` is None: then a real
    process, as the tests of its exit codes and of a store that cannot be opened run it."""
    argv = ["--format", "json", *flags, url]
    if capfd is None:
        result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", *argv],
                                capture_output=True, text=True, timeout=120)
    else:
        result = run_main(check_cli.main, argv, capfd, show_warnings=True)
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) <= 1, result.stderr
    if result.returncode == 2:
        return 2, [], result.stderr.strip()
    return result.returncode, findings(json.loads(result.stdout)), result.stderr


def findings(doc: dict[str, Any]) -> Found:
    """One report's findings, the report checked against the schema; never a crash of a rule."""
    jsonschema.validate(doc, REPORT_SCHEMA)
    found = [(f["rule"], f["severity"], f["key"]) for f in doc["findings"]]
    assert not [f for f in found if f[0] == "NCZ-CHECK-CRASH"], found
    return found


def assert_fault(capfd: Any, url: str, expected: tuple[str, str, str | None], code: int, *flags: str) -> None:
    rc, found, stderr = check(capfd, url, "--deep", *flags)
    assert rc == code, (found, stderr)
    assert expected in found, found
    assert stderr == ""


def dump(capfd: Any, *argv: str) -> subprocess.CompletedProcess[str]:
    """nczarr-dump, a reader of these stores beside the peers: its main() in this process."""
    return run_main(dump_cli.main, argv, capfd)


# ---- each fault, on disk and in a zip ------------------------------------------------------

def test_the_hand_built_base_is_valid(tmp_path):
    """A real process checking both stores in one run: exit 0 (the worst of the two), a JSON array of two
    reports, neither with an error."""
    urls = [to_dir(base(), tmp_path / "d.zarr"), to_zip(base(), tmp_path / "z.zip")]
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.check", "--format", "json", "--deep", *urls],
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    docs = json.loads(result.stdout)
    assert [doc["url"] for doc in docs] == urls
    for doc in docs:
        found = findings(doc)
        assert not [f for f in found if f[1] == "error"], found


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_fault_is_an_error_finding(fault, kind, tmp_path, capfd):
    make, expected, code = FAULTS[fault]
    url = to_dir(make(), tmp_path / "d.zarr") if kind == "dir" else to_zip(make(), tmp_path / "z.zip")
    assert_fault(capfd, url, expected, code)


@pytest.mark.s3
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_the_same_finding_on_s3(fault, s3_bucket, capfd):
    make, expected, code = FAULTS[fault]
    assert_fault(capfd, to_s3(make(), s3_bucket, "ds"), expected, code)


def test_dotdot_names_are_the_same_error_in_a_zip_and_on_s3(tmp_path, s3_bucket, capfd):
    objs = base()
    objs["/a/../../escaped"] = b"x"
    zipped = tmp_path / "evil.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        for key, data in objs.items():
            zf.writestr(key.lstrip("/"), data)
    for url in (str(zipped), to_s3(objs, s3_bucket, "evil")):
        rc, found, _ = check(capfd, url)
        assert rc == 1 and ("NCZ-STORE-UNSAFE", "error", None) in found, (url, found)
        assert not [f for f in found if f[0] == "NCZ-STORE-STRAY"], found
    assert not (tmp_path.parent / "escaped").exists()


# ---- unreadable objects: a finding, whichever object ---------------------------------------

@pytest.mark.parametrize("key", ["/a/0", "/a/.zarray"])
def test_unreadable_object_in_a_directory(tmp_path, key, capfd):
    """A symbolic link to itself cannot be read (ELOOP), even by root."""
    url = to_dir(base(), tmp_path / "d.zarr")
    target = Path(url).joinpath(*key.strip("/").split("/"))
    target.unlink()
    target.symlink_to(target.name)
    assert_fault(capfd, url, ("NCZ-STORE-READ", "error", key), 1)


@pytest.mark.parametrize("key", ["/a/0", "/a/.zarray"])
def test_unreadable_member_in_a_zip(tmp_path, key, capfd):
    """A member whose bytes no longer match its CRC-32 cannot be read (zipfile raises BadZipFile)."""
    path = Path(to_zip(base(), tmp_path / "z.zip"))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(key.lstrip("/"))
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 1] ^= 0xFF  # inside the stored member's data
    path.write_bytes(bytes(data))
    assert_fault(capfd, str(path), ("NCZ-STORE-READ", "error", key), 1)


# ---- the store cannot be opened at all: exit 2, one line -----------------------------------

def test_missing_store_is_exit_2(tmp_path):
    rc, _, line = check(None, str(tmp_path / "nothing.zarr"))
    assert rc == 2 and line == f"nczarr-check: {tmp_path / 'nothing.zarr'}: no such file or directory"


@pytest.mark.s3
def test_missing_bucket_is_exit_2(moto_server):
    rc, _, line = check(None, "s3://no-such-bucket-here/ds#mode=zarr,s3")
    assert rc == 2 and line.startswith("nczarr-check: s3://no-such-bucket-here/ds: no such bucket")


# ---- the faults are real: peers refuse or misread these stores -----------------------------

def test_deep_json_is_refused_by_python_json():
    with pytest.raises(RecursionError):
        json.loads(deep_json()["/a/.zattrs"])


def test_nan_fill_is_refused_by_tensorstore(tmp_path):
    ts = require_module("tensorstore")
    url = to_dir(nan_fill(), tmp_path / "d.zarr")
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": f"{url}/a"}}
    with pytest.raises(ValueError, match="Invalid JSON"):
        ts.open(spec).result()
    ok = to_dir(base(), tmp_path / "ok.zarr")
    assert ts.open({**spec, "kvstore": {"driver": "file", "path": f"{ok}/a"}}).result().shape == (3,)


def test_nan_attribute_as_zarr_python_writes_it_is_a_warning(tmp_path, capfd):
    zarr = require_module("zarr")
    group = zarr.open_group(str(tmp_path / "zp.zarr"), mode="w", zarr_format=2)
    group.attrs["missing"] = float("nan")
    assert b"NaN" in (tmp_path / "zp.zarr" / ".zattrs").read_bytes()
    rc, found, _ = check(capfd, str(tmp_path / "zp.zarr"))
    assert rc == 0 and ("NCZ-ATTR-NAN", "warning", "/.zattrs") in found


def test_stale_zmetadata_is_read_by_consolidating_readers(tmp_path, capfd):
    """zarr-python (consolidated) and nczarr-dump see the .zmetadata shape [4]; the object says [3]."""
    zarr = require_module("zarr")
    url = to_dir(stale_zmetadata(), tmp_path / "d.zarr")
    assert zarr.open_consolidated(url, zarr_format=2)["a"].shape == (4,)
    assert zarr.open_group(url, zarr_format=2, use_consolidated=False)["a"].shape == (3,)
    dumped = dump(capfd, "-H", url)
    assert "x = 4 ;" in dumped.stdout


def spelled_fill(in_zarray: object, in_zmetadata: object) -> Objects:
    """base(), its .zarray fill_value written as ``in_zarray``, its .zmetadata entry as ``in_zmetadata``.

    A float is written bare (``NaN``, ``Infinity``: Python's json, as zarr-python 2 wrote .zmetadata),
    a str quoted (``"NaN"``: the Zarr v2 spec's spelling).
    """
    objs = base()
    doc = json.loads(objs["/a/.zarray"])
    objs["/a/.zarray"] = json.dumps({**doc, "fill_value": in_zarray}).encode()
    meta = {k.lstrip("/"): json.loads(v) for k, v in objs.items() if k.rsplit("/", 1)[-1].startswith(".z")}
    meta["a/.zarray"]["fill_value"] = in_zmetadata
    objs["/.zmetadata"] = json.dumps({"zarr_consolidated_format": 1, "metadata": meta}).encode()
    return objs


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("in_zarray,in_zmetadata", [(NAN, "NaN"), ("NaN", NAN), ("Infinity", INF), (-INF, "-Infinity")],
                         ids=["bare-vs-quoted", "quoted-vs-bare", "inf", "-inf"])
def test_fill_spelled_two_ways_is_not_stale(tmp_path, in_zarray, in_zmetadata, capfd):
    """zarr-python reads one fill from either object: the .zmetadata entry is not stale (issue 20 item 21)."""
    zarr = pytest.importorskip("zarr")
    url = to_dir(spelled_fill(in_zarray, in_zmetadata), tmp_path / "d.zarr")
    consolidated = zarr.open_consolidated(url, zarr_format=2)["a"].fill_value
    alone = zarr.open_group(url, zarr_format=2, use_consolidated=False)["a"].fill_value
    assert np.array_equal(consolidated, alone, equal_nan=True)  # the peer sees one fill
    _, found, _ = check(capfd, url)
    assert not [f for f in found if f[0] == "NCZ-CONSOLIDATED-MATCH"], found


@pytest.mark.parametrize("in_zarray,in_zmetadata", [("NaN", 0.0), (NAN, "Infinity"), (0.0, -0.0), ("NaN", "nan")],
                         ids=["nan-vs-zero", "nan-vs-inf", "signed-zero", "undecodable"])
def test_fill_that_differs_is_stale(tmp_path, in_zarray, in_zmetadata, capfd):
    url = to_dir(spelled_fill(in_zarray, in_zmetadata), tmp_path / "d.zarr")
    rc, found, _ = check(capfd, url)
    assert rc == 1 and ("NCZ-CONSOLIDATED-MATCH", "error", "/.zmetadata") in found, found


def test_dim_conflict_is_refused_by_xarray_and_nczarr_dump(tmp_path, capfd):
    xr = require_module("xarray")
    url = to_dir(dim_conflict(), tmp_path / "d.zarr")
    with pytest.raises(ValueError, match="conflicting sizes"):
        xr.open_zarr(url, consolidated=False)
    dumped = dump(capfd, url)
    assert dumped.returncode == 2 and "dimension 'x' has size 4 here but 3" in dumped.stderr


@pytest.mark.parametrize("depth", [255, 256, 257, 400])
def test_json_depth_limit(tmp_path, depth, capfd):
    """Nesting the parser accepts but readers recursing over values do not is refused too (MAX_JSON_DEPTH)."""
    from nczarr_conformance.checker.context import MAX_JSON_DEPTH

    objs = base()
    # the .zattrs object itself is one level: its member nests depth - 1 more
    objs["/a/.zattrs"] = b'{"_ARRAY_DIMENSIONS": ["x"], "d": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    rc, found, _ = check(capfd, to_dir(objs, tmp_path / "d.zarr"))
    deep = [f for f in found if f[0] == "NCZ-JSON-DEPTH"]
    assert (rc, deep) == ((1, [("NCZ-JSON-DEPTH", "error", "/a/.zattrs")]) if depth > MAX_JSON_DEPTH else (0, []))


def test_a_key_that_is_both_object_and_prefix_is_the_same_error_in_a_zip_and_on_s3(tmp_path, s3_bucket, capfd):
    """`a/.zattrs` as an object and as a folder of `a/.zattrs/0`: a directory cannot hold it, a zip and S3 can."""
    objs = base()
    objs["/a/.zattrs"] = j({})
    objs["/a/.zattrs/0"] = b"junk"
    for url in (to_zip(objs, tmp_path / "clash.zip"), to_s3(objs, s3_bucket, "clash")):
        rc, found, _ = check(capfd, url)
        assert rc == 1 and ("NCZ-STORE-KEYCLASH", "error", "/a/.zattrs") in found, (url, found)
    rc, found, _ = check(capfd, to_zip(base(), tmp_path / "fine.zip"))
    assert not [f for f in found if f[0] == "NCZ-STORE-KEYCLASH"], found


def test_more_dimensions_than_numpy_holds_is_an_error_not_a_crash(tmp_path):
    """netcdf-c allows 1024 dimensions; numpy (and so zarr-python, xarray and our reader) 64."""
    import zarr

    objs = base()
    objs["/a/.zarray"] = j({**zarray([1] * 100), "chunks": [1] * 100})
    url = to_dir(objs, tmp_path / "ndim")
    with pytest.raises(ValueError, match="maximum supported dimension"):  # the peer fails the same way
        zarr.open_array(str(tmp_path / "ndim" / "a"), mode="r")[...]
    rc, found, _ = check(None, url)  # a real process: the exit code of an error finding
    assert rc == 1 and ("NCZ-ARRAY-NDIM", "error", "/a/.zarray") in found, found
    dumped = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", url], capture_output=True, text=True,
                            timeout=60)
    assert dumped.returncode == 2 and dumped.stderr.count("\n") == 1, dumped.stderr
    assert "/a/.zarray: 100 dimensions" in dumped.stderr and "bug" not in dumped.stderr
