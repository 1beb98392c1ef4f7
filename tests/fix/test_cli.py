"""nczarr-fix as a user runs it: dry run writes nothing, in place is atomic with a backup beside the store,
--out leaves the input identical, on a directory, a zip and a real (moto) S3 server; bad input is one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.fix.helpers import c410, snapshot, zarray

pytestmark = pytest.mark.peer


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.fix", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def _store(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    return c410(tmp_path / "data" / "n.file", byte=True, shuffle=True)


def _zip(src: Path, dest: Path) -> Path:
    """The store zipped as netcdf-c's zip layout has it: everything under ``<name>/``; chunks deflated, metadata
    stored (so a rewrite that does not keep each member's compression shows)."""
    with zipfile.ZipFile(dest, "w") as zf:
        folder = dest.name[:-4]
        for p in sorted(src.rglob("*")):
            if p.is_file():
                how = zipfile.ZIP_STORED if p.name.startswith(".z") else zipfile.ZIP_DEFLATED
                zf.write(p, f"{folder}/{p.relative_to(src)}", compress_type=how)
    return dest


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def _stamps(path: Path) -> dict[str, tuple[int, tuple[int, ...]]]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: (i.compress_type, i.date_time) for i in zf.infolist()}


def test_dry_run_prints_a_diff_and_writes_nothing(tmp_path):
    store = _store(tmp_path)
    before = snapshot(tmp_path)
    result = run(str(store), "--dry-run")
    assert result.returncode == 1, result.stderr
    assert "--- a/b/.zarray\n+++ b/b/.zarray\n" in result.stdout
    assert '-  "dtype": "<i1",\n+  "dtype": "|i1",' in result.stdout
    assert "--- /dev/null\n+++ b/.zmetadata" in result.stdout
    assert "# /i: 2 chunk(s) re-encoded" in result.stdout
    assert snapshot(tmp_path) == before  # bytes and mtimes of the store and everything beside it


def test_dry_run_of_a_fixed_store_exits_0(tmp_path):
    store = _store(tmp_path)
    assert run(str(store), "--no-backup").returncode == 0
    result = run(str(store), "--dry-run")
    assert (result.returncode, result.stdout) == (0, "nothing to fix\n")


def test_in_place_keeps_a_backup_beside_the_store(tmp_path):
    store = _store(tmp_path)
    before = snapshot(store)
    result = run(str(store))
    assert result.returncode == 0, result.stderr
    backups = [p for p in store.parent.iterdir() if p.name.startswith("n.file.nczarr-fix-backup-")]
    assert len(backups) == 1 and f"backup: {backups[0]}" in result.stdout
    saved = snapshot(backups[0])
    manifest = json.loads(saved.pop("nczarr-fix-backup.json")[0])
    assert manifest["created"] == ["/.zmetadata"]
    assert {k: v[0] for k, v in saved.items()} == {k: before[k][0] for k in ("b/.zarray", "ub/.zarray", "i/.zarray",
                                                                              "i/0", "i/1")}
    after = snapshot(store)
    assert zarray(store, "b")["dtype"] == "|i1" and "n.file.nczarr-fix-backup" not in "".join(after)
    # what the fix does not rewrite is untouched: same bytes, same mtime
    assert {k: v for k, v in after.items() if k in before and k not in saved} == \
        {k: v for k, v in before.items() if k not in saved}


def test_metadata_only_fix_swaps_a_rebuilt_tree_keeping_each_objects_mode(tmp_path):
    store = c410(tmp_path / "n.file", byte=True)
    (store / "b" / ".zarray").chmod(0o640)
    (store / "ub" / ".zarray").chmod(0o604)
    inode = store.stat().st_ino
    assert run(str(store), "--no-backup").returncode == 0
    assert (store / "b" / ".zarray").stat().st_mode & 0o777 == 0o640
    assert (store / "ub" / ".zarray").stat().st_mode & 0o777 == 0o604
    assert zarray(store, "b")["dtype"] == "|i1"
    # rebuilt aside and exchanged (#20 items 1, 9, 10): never an object edited in the live tree
    assert store.stat().st_ino != inode
    assert not [p for p in tmp_path.rglob("*") if "partial" in p.name]


def test_chunk_rewrite_swaps_the_whole_tree(tmp_path):
    store = _store(tmp_path)
    inode = store.stat().st_ino
    assert run(str(store), "--no-backup").returncode == 0
    assert store.stat().st_ino != inode  # rebuilt aside and exchanged: chunks and .zarray change together
    assert zarray(store, "i")["filters"] is None and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_no_backup(tmp_path):
    store = _store(tmp_path)
    assert run(str(store), "--no-backup").returncode == 0
    assert [p.name for p in store.parent.iterdir()] == ["n.file"]


def test_zip_in_place(tmp_path):
    zarr = require_module("zarr")
    path = _zip(_store(tmp_path), tmp_path / "n.zip")
    before, stamped = _members(path), _stamps(path)
    result = run(str(path), "--no-backup")
    assert result.returncode == 0, result.stderr
    after = _members(path)
    # fix/apply.py: the same names, compression and dates, edited members included
    assert {k: v for k, v in _stamps(path).items() if k in stamped} == stamped
    assert list(after)[: len(before)] == list(before)  # member order kept: entry 0 still names netcdf-c's root
    assert list(after)[len(before):] == ["n/.zmetadata"]
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"n/b/.zarray", "n/ub/.zarray", "n/i/.zarray", "n/i/0", "n/i/1"}
    zs = zarr.storage.ZipStore(path, mode="r")
    assert zarr.open_group(zs, path="n", mode="r", zarr_format=2)["b"][...].tolist() == [1, -1, 127, -128]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_out_leaves_the_input_identical(tmp_path):
    store = _store(tmp_path)
    before = snapshot(tmp_path)
    result = run(str(store), "--out", str(tmp_path / "fixed.zip"))
    assert result.returncode == 0, result.stderr
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("fixed.zip")} == before
    out = _members(tmp_path / "fixed.zip")
    for key, (data, _) in before.items():
        name = "fixed/" + key.split("/", 2)[-1] if key.startswith("data/n.file/") else None
        if name and key.split("/")[-1] in ("0", "1", "2", "3") and "/i/" not in key:
            assert out[name] == data  # chunks copied byte for byte (the shuffled ones are re-encoded)
    assert json.loads(out["fixed/b/.zarray"])["dtype"] == "|i1"


@pytest.mark.s3
def test_s3_in_place_dry_run_and_out(tmp_path, s3_bucket, moto_server):
    import boto3

    zarr = require_module("zarr")
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    store = _store(tmp_path)
    for p in store.rglob("*"):
        if p.is_file():
            client.put_object(Bucket=s3_bucket, Key=f"ds/{p.relative_to(store)}", Body=p.read_bytes())

    def listing() -> dict[str, str]:
        return {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}

    before = listing()
    url = f"s3://{s3_bucket}/ds"
    assert run(url, "--dry-run").returncode == 1 and listing() == before
    result = run(url, "--out", str(tmp_path / "copy.file"))
    assert result.returncode == 0, result.stderr
    assert listing() == before and zarray(tmp_path / "copy.file", "i")["filters"] is None
    result = run(url)
    assert result.returncode == 0, result.stderr
    assert "note: NCZ-FIX-NO-FILTERS /i: not applied" in result.stdout  # no chunk rewrite in place on S3
    after = listing()
    backup = {k for k in after if k.startswith("ds.nczarr-fix-backup-")}
    assert {k.split("/", 1)[1] for k in backup} == {"b/.zarray", "ub/.zarray", "i/.zarray", "nczarr-fix-backup.json"}
    assert {k for k in after if k.startswith("ds/") and after[k] != before.get(k)} == \
        {"ds/b/.zarray", "ds/ub/.zarray", "ds/i/.zarray", "ds/.zmetadata"}
    got = client.get_object(Bucket=s3_bucket, Key="ds/b/.zarray")["Body"].read()
    assert json.loads(got)["dtype"] == "|i1"
    local = tmp_path / "again.file"
    assert run(url, "--out", str(local)).returncode == 0
    assert zarr.open_group(str(local), mode="r", zarr_format=2)["b"][...].tolist() == [1, -1, 127, -128]


def test_s3_bucket_root_needs_out_or_no_backup(tmp_path, s3_bucket, moto_server):
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    store = _store(tmp_path)
    for p in store.rglob("*"):
        if p.is_file():
            client.put_object(Bucket=s3_bucket, Key=str(p.relative_to(store)), Body=p.read_bytes())
    result = run(f"s3://{s3_bucket}")
    assert result.returncode == 2 and "use --out URL2 or --no-backup" in result.stderr
    assert run(f"s3://{s3_bucket}", "--no-backup").returncode == 0


@pytest.mark.parametrize("case", ["missing", "not-json", "netcdf-file", "out-exists", "out-inside", "bad-for",
                                  "no-dataset"])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, case):
    store = _store(tmp_path)
    args = [str(store)]
    if case == "missing":
        args = [str(tmp_path / "nope")]
    elif case == "not-json":
        (store / "b" / ".zarray").write_text("{not json")
    elif case == "netcdf-file":
        (tmp_path / "f.nc").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
        args = [str(tmp_path / "f.nc")]
    elif case == "out-exists":
        (tmp_path / "exists").mkdir()
        args += ["--out", str(tmp_path / "exists")]
    elif case == "out-inside":
        args += ["--out", str(store / "inner")]
    elif case == "bad-for":
        args += ["--for", "netcdf-java"]
    elif case == "no-dataset":
        (tmp_path / "empty").mkdir()
        args = [str(tmp_path / "empty")]
    before = snapshot(tmp_path)
    result = run(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("nczarr-fix: ")
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert WHY[case] in result.stderr and "this is a bug" not in result.stderr, result.stderr
    assert snapshot(tmp_path) == before


WHY = {"missing": "nope: no such file or directory", "not-json": "/b/.zarray: not valid JSON",
       "netcdf-file": "f.nc", "out-exists": "exists", "out-inside": "inside the input", "bad-for": "readers are",
       "no-dataset": "no dataset here"}


def test_nczarr_check_names_the_fix(tmp_path):
    import jsonschema

    from tests.check.test_check import REPORT_SCHEMA, run_cli

    store = _store(tmp_path)
    text = run_cli(str(store)).stdout
    assert "warning NCZ-INTEROP-ZARR-I1 /b/.zarray: zarr-python 3.1 cannot read dtype <i1 (fix: NCZ-FIX-BYTE-DTYPE)" \
        in text.splitlines()
    assert "NCZ-INTEROP-C490-CODEC /i/.zarray: netcdf-c 4.9.0 (Debian) reads wrong values: compressed chunks\n" in text
    doc = json.loads(run_cli(str(store), "--format", "json").stdout)
    jsonschema.validate(doc, REPORT_SCHEMA)
    fixes = {(f["rule"], f.get("fix")) for f in doc["findings"]}
    assert ("NCZ-INTEROP-SHUFFLE0", "NCZ-FIX-SHUFFLE-ELEMENTSIZE") in fixes
    assert ("NCZ-INTEROP-C490-CODEC", None) in fixes
    assert run(str(store), "--no-backup").returncode == 0
    after = json.loads(run_cli(str(store), "--format", "json").stdout)
    assert [f for f in after["findings"] if "fix" in f] == []  # every finding a fix names is cured by it


def test_nothing_to_fix_writes_no_backup(tmp_path):
    store = _store(tmp_path)
    assert run(str(store), "--no-backup").returncode == 0
    before = snapshot(tmp_path)
    result = run(str(store))
    assert (result.returncode, result.stdout) == (0, "nothing to fix\n") and snapshot(tmp_path) == before


def test_list_fixes_and_reader_names_match_the_registry():
    from nczarr_conformance.cli.fix import READERS as CLI_READERS
    from nczarr_conformance.fix.registry import FIXES, READERS

    assert CLI_READERS == READERS
    listed = run("--list-fixes").stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in listed] == list(FIXES)


def test_list_fixes_shows_the_first_line_of_each_docstring(monkeypatch, capsys):
    """registry.py: "The first line of its docstring is the documented description": what --list-fixes prints after
    the id, readers and cures, whatever follows that line in the docstring."""
    from nczarr_conformance.cli import fix as cli_fix
    from nczarr_conformance.fix.registry import FIXES, Fix

    def two_lines(ctx):
        """Makes what --list-fixes shows.

        Detail for readers of the code, never listed."""
        return iter(())

    monkeypatch.setitem(FIXES, "NCZ-FIX-DOC-TEST", Fix("NCZ-FIX-DOC-TEST", two_lines, ("xarray",), ("NCZ-X-Y",)))
    assert cli_fix.main(["--list-fixes"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == "NCZ-FIX-DOC-TEST [xarray] (cures NCZ-X-Y): Makes what --list-fixes shows."


@pytest.mark.parametrize("args", [[], ["--dry-run"], ["--for", "xarray"]])
def test_a_zarr_v3_store_has_nothing_to_fix(tmp_path, args):
    """Every fix edits Zarr v2 metadata: on a v3 store (zarr-python's) nczarr-fix says so plainly, exit 0, and
    changes nothing (it said "no dataset here: neither /.zgroup nor /.zarray exists", exit 2)."""
    zarr = require_module("zarr")
    g = zarr.open_group(str(tmp_path / "v3.zarr"), mode="w", zarr_format=3)
    g.create_array("t", shape=(4,), chunks=(2,), dtype="int16", dimension_names=["t"])[:] = [1, 2, 3, 4]
    before = snapshot(tmp_path)
    result = run(str(tmp_path / "v3.zarr"), *args)
    assert (result.returncode, result.stdout, result.stderr) == (0, "Zarr v3 store: nothing to fix\n", "")
    assert snapshot(tmp_path) == before


def test_no_dataset_names_what_v2_and_v3_look_for(tmp_path):
    """An empty directory: one line naming the path and every root object either Zarr version looks for."""
    (tmp_path / "empty").mkdir()
    result = run(str(tmp_path / "empty"))
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr == (f"nczarr-fix: {tmp_path / 'empty'}: no dataset here: none of /.zgroup, /.zarray "
                             "(Zarr v2) or /zarr.json (Zarr v3) exists\n")
