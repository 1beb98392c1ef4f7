"""The matrix's peer adapters use the peers' own tools, not code under test: netcdf-c 4.9.0 (a command adapter,
nczarr-conformance.toml) writes from the CDL its ncdump printed, zarr-python lists and types with its own API."""
from __future__ import annotations

import ast
import subprocess

import pytest

from nczarr_conformance.conformance.cases import BY_ID, V1_LABEL
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.command import CONFIG_NAME, build, load_config
from nczarr_conformance.peers.corpus import CORPUS_CASES
from nczarr_conformance.peers.zarr_python import ZarrPython
from tests.conftest import REPO, require_tool

pytestmark = pytest.mark.peer


def test_490_writer_feeds_ncgen_what_ncdump_printed(tmp_path):
    """The writer runs in a process of its own with no CDL of ours at hand: the CDL ncgen got is, byte for byte,
    what ncdump 4.9.0 prints of the netCDF-4 file of the case, and the store is ncgen's."""
    require_tool("ncgen")
    (peer,) = [p for p in build(load_config(REPO / CONFIG_NAME)) if p.id == "netcdf-c-4.9"]
    peer.write(BY_ID["big-endian"].model(), tmp_path / "w", {})
    printed = subprocess.run([require_tool("ncdump"), "-p", "9,17", str(tmp_path / "w.nc")], capture_output=True,
                             check=True, timeout=120).stdout
    assert (tmp_path / "w.cdl").read_bytes() == printed
    assert (tmp_path / "w" / ".zgroup").exists()


@pytest.mark.parametrize("script", sorted(p.relative_to(REPO).as_posix() for p in (REPO / "adapters").rglob("*.py")))
def test_adapters_import_nothing_of_ours(script):
    """What is graded through adapters/ is the outside tool, never this package: no script imports it."""
    tree = ast.parse((REPO / script).read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert [m for m in imported if m.split(".")[0] in ("nczarr_conformance", "tests")] == []


def test_zarr_python_reader_lists_and_types_with_zarr_python(tmp_path, monkeypatch):
    """Our store listing and our Appendix D decoder are made to fail: the zarr-python reader must not care."""
    import zarr

    from nczarr_conformance.nczarr import attrs
    from nczarr_conformance.stores import DirectoryStore

    def not_ours(*args, **kwargs):
        raise AssertionError("the zarr-python reader must use zarr-python's API")

    monkeypatch.setattr(DirectoryStore, "list_dir", not_ours)
    monkeypatch.setattr(DirectoryStore, "get", not_ours)
    monkeypatch.setattr(attrs, "decode", not_ours)
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w", zarr_format=2)
    g.attrs.update({"title": "t", "n": [1, 2], "x": 1.5, "names": ["a", "b"], "obj": {"k": [1]}})
    g.create_array("a", shape=(2,), dtype="<i4", fill_value=0)[...] = [3, 4]
    g.create_group("sub").create_array("b", shape=(1,), dtype="<f8", fill_value=0.0)[...] = [2.5]
    seen = ZarrPython().read(str(tmp_path / "z.zarr"))
    assert seen.root.variables["a"].data.tolist() == [3, 4]
    assert seen.root.groups["sub"].variables["b"].data.tolist() == [2.5]
    got = {n: (a.type, a.value if a.type == "char" else a.value.tolist()) for n, a in seen.root.attributes.items()}
    assert got == {"title": ("char", "t"), "n": ("int64", [1, 2]), "x": ("double", [1.5]),
                   "names": ("string", ["a", "b"]), "obj": ("char", '{"k": [1]}')}


def test_v1_store_is_labelled_synthesised_everywhere():
    assert CORPUS_CASES["nczarr-v1"] == "v1"
    assert BY_ID["nczarr-v1"].title == V1_LABEL
    assert "synthesised from nczarr.md" in V1_LABEL and "no released netcdf-c writes v1" in V1_LABEL
    assert "synthesised from nczarr.md" in PEERS["netcdf-c-corpus"].name
