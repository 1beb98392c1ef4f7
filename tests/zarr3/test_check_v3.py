"""nczarr-check's Zarr v3 rules (issue #25, check slice): NCZ-V3-SCHEMA, -CODECS, -SHARD, -CONSOLIDATED.

Each rule fires on a defect planted by hand in an otherwise valid store and is silent on what zarr-python 3.1.6,
xarray and our writer produce. What counts as a defect comes from the spec text (docs/spec/zarr-v3-excerpts.txt)
and, for reader predictions, from running the reader (zarr-python's registry, TensorStore), never from our code.
"""
from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

from nczarr_conformance.checker import check
from nczarr_conformance.checker.rules import Severity
from nczarr_conformance.checker.v3 import TENSORSTORE_CODECS, ZARR_PYTHON_CODECS
from nczarr_conformance.stores.directory import DirectoryStore
from tests.check.test_check_cli import run
from tests.zarr3.conftest import build_rich

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

V3_RULES = ("NCZ-V3-SCHEMA", "NCZ-V3-CODECS", "NCZ-V3-SHARD", "NCZ-V3-CONSOLIDATED")
#: the core spec's own example array (core spec, "Array metadata", "Example"), shrunk to 4 elements
ARRAY = {"zarr_format": 3, "node_type": "array", "shape": [4], "dimension_names": ["rows"], "data_type": "float64",
         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
         "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "fill_value": "NaN",
         "attributes": {"foo": 42}}
GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {"spam": "ham"}}


def hand_made(path: Path, array: dict[str, Any] | None = None, **changes: Any) -> Path:
    """A root group and the array /v, written by hand; ``changes`` replace (None: remove) members of /v."""
    doc = json.loads(json.dumps(array or ARRAY))
    for name, value in changes.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    (path / "v").mkdir(parents=True)
    (path / "zarr.json").write_text(json.dumps(GROUP))
    (path / "v" / "zarr.json").write_text(json.dumps(doc))
    return path


def found(path: Path, rule: str, *, deep: bool = False) -> list[tuple[str | None, str, Severity]]:
    """(key, message, severity) of each finding of ``rule`` nczarr-check reports on the store."""
    report = check(str(path), deep=deep)
    return [(f.key, f.message, f.severity) for f in report.findings if f.rule == rule]


def messages(path: Path, rule: str, *, deep: bool = False) -> list[str]:
    return [f"{key}: {message}" for key, message, _ in found(path, rule, deep=deep)]


# ---- silent on what peers and our writer write -----------------------------------------------------------------
def test_the_hand_made_base_store_reads_in_zarr_python_and_is_silent(tmp_path):
    """The base of every planted defect is valid: zarr-python 3.1.6 reads it, and no v3 rule fires on it."""
    path = hand_made(tmp_path / "base.zarr")
    arr = zarr.open_array(str(path / "v"), mode="r")
    assert arr.shape == (4,) and math.isnan(arr.fill_value)
    report = check(str(path), deep=True)
    assert [f for f in report.findings if f.rule in V3_RULES] == []


@pytest.fixture(scope="module")
def peer_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stores as zarr-python 3.1.6 (every feature our reader reads; consolidated or not) and xarray write them."""
    xr = pytest.importorskip("xarray")
    base = tmp_path_factory.mktemp("peers")
    stores = {"zarr-python": build_rich(base / "rich.zarr"),
              "zarr-python consolidated": build_rich(base / "richc.zarr", consolidated=True)}
    ds = xr.Dataset({"t": (("x", "y"), np.arange(15.0).reshape(5, 3), {"units": "K"}),
                     "s": ("x", np.array(["a", "bb", "c", "d", "é"])), "i": ("x", np.arange(5, dtype="i2"))},
                    coords={"x": np.arange(5)}, attrs={"title": "xarray v3"})
    ds.to_zarr(base / "xr.zarr", zarr_format=3, mode="w")
    ds.to_zarr(base / "xr-sharded.zarr", zarr_format=3, mode="w",
               encoding={"t": {"chunks": (1, 3), "shards": (5, 3)}})
    stores.update({"xarray": base / "xr.zarr", "xarray sharded": base / "xr-sharded.zarr"})
    return stores


@pytest.mark.parametrize("which", ["zarr-python", "zarr-python consolidated", "xarray", "xarray sharded"])
def test_silent_on_zarr_python_and_xarray_output(peer_stores, which):
    report = check(str(peer_stores[which]), deep=True)
    assert report.flavor == "zarr-v3"
    assert [(f.rule, f.key, f.message) for f in report.findings if f.rule in V3_RULES] == []


@pytest.mark.parametrize("extra", [[], ["--shard", "2"]], ids=["plain", "sharded"])
def test_silent_on_our_writer_output(tmp_path, extra):
    pytest.importorskip("netCDF4")
    from tests.test_convert_valid import run_cli
    from tests.zarr3.test_write import make_source

    src = make_source(tmp_path / "src.nc")
    done = run_cli("--quiet", "--zarr-format", "3", *extra, str(src), str(tmp_path / "out.zarr"))
    assert done.returncode == 0, done.stderr
    report = check(str(tmp_path / "out.zarr"), deep=True)
    assert [(f.rule, f.key, f.message) for f in report.findings if f.rule in V3_RULES] == []


# ---- NCZ-V3-SCHEMA -----------------------------------------------------------------------------------------------
SCHEMA_DEFECTS = [
    ({"zarr_format": 2}, "zarr_format 2: it must be the integer 3"),
    ({"zarr_format": 3.0}, "zarr_format 3.0: it must be the integer 3"),
    ({"node_type": "table"}, 'node_type "table": it must be "array" or "group"'),
    ({"shape": [-1]}, "shape [-1]: it must be a list of integers >= 0"),
    ({"shape": "4"}, 'shape "4": it must be a list of integers >= 0'),
    ({"data_type": None}, "data_type is missing; the spec requires it of an array"),
    ({"data_type": {"configuration": {}}}, "an extension is a name or an object with a string"),
    ({"chunk_grid": {"name": "rectilinear"}}, 'not the core "regular" grid'),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [0]}}},
     "chunk_grid chunk_shape [0]: it must be a list of integers >= 1"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}}},
     "chunk_grid chunk_shape [2, 2] has 2 dimensions; shape has 1"),
    ({"chunk_key_encoding": {"name": "default", "configuration": {"separator": "-"}}},
     'chunk_key_encoding separator "-": it must be "/" or "."'),
    ({"chunk_key_encoding": {"name": "v9"}}, 'neither "default" nor "v2"'),
    ({"fill_value": None}, "fill_value is missing"),
    ({"fill_value": "nan"}, 'fill_value "nan": a float fill_value must be a number, "NaN"'),
    ({"fill_value": "0x7ff800000000000000"}, "hex form wider than the type's 8 bytes"),
    ({"data_type": "int32", "fill_value": 1.5}, "fill_value 1.5: an integer fill_value must be a JSON number with no "
                                                "fraction or exponent"),
    ({"data_type": "int8", "fill_value": 128}, "fill_value 128: out of the data type's range -128..127"),
    ({"data_type": "uint64", "fill_value": -1}, "out of the data type's range 0..18446744073709551615"),
    ({"data_type": "bool", "fill_value": 0}, "a bool array's fill_value must be true or false"),
    ({"data_type": "complex64", "fill_value": 1}, "a complex fill_value must be a two-element array"),
    ({"data_type": "string", "fill_value": 0}, "a string array's fill_value must be a string"),
    ({"data_type": "bytes", "fill_value": [256]}, "it must be a list of integers in 0..255"),
    ({"data_type": "bytes", "fill_value": "%%%"}, "neither a list of bytes nor base64 text"),
    ({"codecs": []}, "codecs []: it must be a non-empty list"),
    ({"codecs": [{"configuration": {}}]}, 'codecs[0] {"configuration": {}}: an extension is a name'),
    ({"codecs": [{"name": "bytes", "configuration": []}]}, "codecs[0] 'bytes': configuration [] must be an object"),
    ({"dimension_names": ["a", "b"]}, 'dimension_names ["a", "b"] has 2 names; shape has 1 dimensions'),
    ({"dimension_names": [1]}, "dimension_names [1]: it must be a list of strings or nulls"),
    ({"attributes": []}, "attributes []: the value must be an object"),
    ({"storage_transformers": {}}, "storage_transformers {}: it must be a list"),
    ({"extra": 1}, "unknown member 'extra' without \"must_understand\": false"),
]


@pytest.mark.parametrize(("change", "expected"), SCHEMA_DEFECTS, ids=[e for _, e in SCHEMA_DEFECTS])
def test_schema_finds_the_planted_defect(tmp_path, change, expected):
    path = hand_made(tmp_path / "s.zarr", **change)
    got = messages(path, "NCZ-V3-SCHEMA")
    assert any(m.startswith("/v/zarr.json: ") and expected in m for m in got), got
    assert all("\n" not in m for m in got)


@pytest.mark.parametrize("fill", [1.5, 10**300, "NaN", "Infinity", "-Infinity", "0x7ff8000000000000", 0])
def test_float_fill_forms_of_the_spec_are_silent_and_zarr_python_reads_them(tmp_path, fill):
    """Floats: a JSON number, "Infinity", "-Infinity", "NaN" or "0xYYYYYYYY" (the core spec's fill value list)."""
    path = hand_made(tmp_path / "f.zarr", fill_value=fill)
    assert messages(path, "NCZ-V3-SCHEMA") == []
    zarr.open_array(str(path / "v"), mode="r")  # the peer takes every one of them


def test_extra_member_with_must_understand_false_is_silent(tmp_path):
    path = hand_made(tmp_path / "m.zarr", extra={"must_understand": False, "note": 1})
    assert messages(path, "NCZ-V3-SCHEMA") == []


def test_zarr_python_refuses_an_unknown_member_the_spec_has_it_refuse(tmp_path):
    """Core spec: readers "MUST fail to open" a node with an unknown member not marked must_understand false;
    zarr-python 3.1.6 does."""
    path = hand_made(tmp_path / "u.zarr", extra=1)
    with pytest.raises(Exception, match="extra"):
        zarr.open_array(str(path / "v"), mode="r")


def test_schema_reports_json_a_node_name_and_a_bare_nan(tmp_path):
    path = hand_made(tmp_path / "j.zarr")
    (path / "__hidden").mkdir()
    (path / "__hidden" / "zarr.json").write_text(json.dumps(GROUP))
    (path / "bad").mkdir()
    (path / "bad" / "zarr.json").write_text("{not json")
    (path / "v" / "zarr.json").write_text(json.dumps(ARRAY).replace('"NaN"', "NaN"))
    got = messages(path, "NCZ-V3-SCHEMA")
    assert any(m.startswith("/__hidden/zarr.json: node name '__hidden' starts with the reserved prefix") for m in got)
    assert any(m.startswith("/bad/zarr.json: not valid JSON") for m in got)
    assert any(m.startswith("/v/zarr.json: bare NaN literal: not JSON") for m in got), got


def test_cli_exits_1_with_one_line_per_finding(tmp_path):
    path = hand_made(tmp_path / "c.zarr", shape=[-1])
    done = run("--select", "NCZ-V3", str(path))
    assert done.returncode == 1, done
    lines = [line for line in done.stdout.splitlines() if "NCZ-V3-SCHEMA" in line]
    assert len(lines) == 1 and "/v/zarr.json" in lines[0] and "shape [-1]" in lines[0], done.stdout


# ---- NCZ-V3-CODECS -----------------------------------------------------------------------------------------------
LE = {"name": "bytes", "configuration": {"endian": "little"}}
SHARD_OK = {"chunk_shape": [1], "codecs": [LE], "index_codecs": [LE, {"name": "crc32c"}], "index_location": "end"}
CODEC_DEFECTS = [
    ([LE, LE], "codecs: 2 array→bytes codecs ['bytes', 'bytes']; exactly one is required"),
    ([{"name": "gzip"}], "codecs: 0 array→bytes codecs []; exactly one is required"),
    ([LE, {"name": "transpose", "configuration": {"order": [0]}}],
     "codecs[1] 'transpose' is array→array but comes after the array→bytes codec"),
    ([{"name": "gzip", "configuration": {"level": 1}}, LE],
     "codecs[0] 'gzip' is bytes→bytes but comes before the array→bytes codec"),
    ([{"name": "bytes"}], "codecs[0] 'bytes': no endian for the 8-byte data_type 'float64'; the spec requires one"),
    ([{"name": "bytes", "configuration": {"endian": "middle"}}], "endian \"middle\"; it must be \"big\" or \"little\""),
    ([{"name": "transpose", "configuration": {"order": [1]}}, LE], "order [1] is not a permutation of the 1 axes"),
    ([{"name": "vlen-utf8"}], "codecs[0] 'vlen-utf8' encodes data_type 'string', not 'float64'"),
    ([LE, {"name": "foo"}], "codecs[1] 'foo' is unknown: zarr-python 3.1.6, TensorStore 0.1.86 and "
                            "nczarr-conformance refuse it"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "chunk_shape": [3]}}],
     "inner chunk_shape [3] does not divide the shard shape [2]"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "chunk_shape": [1, 1]}}],
     "chunk_shape [1, 1] is not 1 integers >= 1"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "codecs": [LE, LE]}}],
     "codecs[0] 'sharding_indexed' codecs: 2 array→bytes codecs"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "index_codecs": [LE, {"name": "gzip"}]}}],
     "index_codecs[1] 'gzip' may change the index's size"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "index_codecs": [{"name": "bytes"}]}}],
     "index_codecs[0] 'bytes': no endian for the 8-byte data_type 'uint64'"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "index_codecs": None}}],
     "index_codecs null must be a non-empty list"),
    ([{"name": "sharding_indexed", "configuration": {**SHARD_OK, "index_location": "middle"}}],
     'index_location "middle"; it must be "start" or "end"'),
]


@pytest.mark.parametrize(("codecs", "expected"), CODEC_DEFECTS, ids=[e[:60] for _, e in CODEC_DEFECTS])
def test_codecs_finds_the_planted_defect(tmp_path, codecs, expected):
    codecs = [dict(c, configuration={k: v for k, v in c["configuration"].items() if v is not None})
              if c.get("name") == "sharding_indexed" else c for c in codecs]
    path = hand_made(tmp_path / "c.zarr", codecs=codecs)
    got = found(path, "NCZ-V3-CODECS")
    hits = [(k, m, s) for k, m, s in got if expected in m]
    assert hits and hits[0][0] == "/v/zarr.json" and hits[0][2] == Severity.ERROR, got


@pytest.mark.parametrize("codecs", [[LE, LE], [{"name": "gzip"}], [{"name": "bytes"}, {"name": "foo"}]],
                         ids=["two array→bytes", "no array→bytes", "unknown"])
def test_zarr_python_refuses_the_chains_the_rule_calls_errors(tmp_path, codecs):
    path = hand_made(tmp_path / "z.zarr", codecs=codecs)
    with pytest.raises(Exception):  # noqa: B017  (zarr-python raises ValueError, TypeError or KeyError by case)
        zarr.open_array(str(path / "v"), mode="r")[...]


def test_single_byte_types_need_no_endian(tmp_path):
    """bytes codec: endian is "Required for data types for which endianness is applicable ... but not single-byte
    data types, such as uint8 or bool"."""
    path = hand_made(tmp_path / "u.zarr", data_type="uint8", fill_value=0, codecs=[{"name": "bytes"}])
    assert found(path, "NCZ-V3-CODECS") == []


def test_a_numcodecs_codec_is_a_warning_naming_tensorstore(tmp_path):
    path = hand_made(tmp_path / "n.zarr", codecs=[LE, {"name": "numcodecs.zlib", "configuration": {"level": 1}}])
    got = found(path, "NCZ-V3-CODECS")
    assert got == [("/v/zarr.json", "codecs[1] 'numcodecs.zlib' is neither a core Zarr v3 codec nor a registered one: "
                    "TensorStore 0.1.86 refuses it (zarr-python 3.1.6 and nczarr-conformance read it)",
                    Severity.WARNING)]
    zarr.open_array(str(path / "v"), mode="r")  # zarr-python reads it, as the finding says


def test_zarr_python_codec_table_is_zarr_pythons_registry():
    """ZARR_PYTHON_CODECS lists zarr-python 3.1.6's codec registry by name and kind."""
    if zarr.__version__ != "3.1.6":
        pytest.skip(f"the table is zarr-python 3.1.6's; {zarr.__version__} is installed")
    import zarr.abc.codec as abc
    import zarr.registry as registry

    registry._collect_entrypoints()
    kinds = {abc.ArrayArrayCodec: "a2a", abc.ArrayBytesCodec: "a2b", abc.BytesBytesCodec: "b2b"}
    theirs = {}
    for name in list(registry.__dict__["__codec_registries"]):  # a defaultdict: names asked for earlier are keys
        try:
            cls = registry.get_codec_class(name)
        except KeyError:
            continue
        if not cls.__module__.startswith(("zarr.", "numcodecs.")):
            continue  # registered by another installed package on its import (kerchunk's grib): not zarr-python's
        theirs[name] = next(k for base, k in kinds.items() if issubclass(cls, base))
    assert theirs == ZARR_PYTHON_CODECS


def test_tensorstore_refuses_what_the_finding_says(tmp_path):
    """TensorStore 0.1.86's zarr3 driver: a codec name outside TENSORSTORE_CODECS fails '"<name>" is not
    registered'; the names inside it are registered (their failure here, if any, is another one)."""
    ts = pytest.importorskip("tensorstore")
    for name in sorted({*ZARR_PYTHON_CODECS, "foo"}):
        path = hand_made(tmp_path / f"{name}.zarr", codecs=[{"name": name}])
        try:
            ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path / "v")}}).result()
            refused = False
        except ValueError as exc:
            refused = "is not registered" in str(exc)
        assert refused == (name not in TENSORSTORE_CODECS), name


# ---- NCZ-V3-SHARD (--deep) ---------------------------------------------------------------------------------------
def sharded(path: Path, *, location: str = "end") -> Path:
    """zarr-python 3.1.6's 16 int32 in shards of 8 (2 inner chunks of 4); the index: 2 x (offset, nbytes) + crc32c."""
    from zarr.codecs import ShardingCodec

    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    a = g.create_array("v", shape=(16,), chunks=(8,), dtype="int32", dimension_names=["t"],
                       serializer=ShardingCodec(chunk_shape=(4,), index_location=location), compressors=None)
    a[:] = np.arange(16)
    return path / "v" / "c" / "0"


def plant_index(shard: Path, change, *, location: str = "end", crc: bool = True) -> None:
    raw = shard.read_bytes()
    index_at = slice(0, 36) if location == "start" else slice(len(raw) - 36, len(raw))
    table = np.frombuffer(raw[index_at][:32], dtype="<u8").copy().reshape(2, 2)
    change(table, len(raw))
    body = table.tobytes()
    index = bytes(numcodecs.CRC32C(location="end").encode(body)) if crc else body + raw[index_at][32:]
    shard.write_bytes(index + raw[36:] if location == "start" else raw[:-36] + index)


EMPTY = 2**64 - 1
SHARD_DEFECTS = {
    "past the end": (lambda t, n: t.__setitem__((1, 0), n + 1000), "index entry [1] points at bytes"),
    "overlap": (lambda t, n: t.__setitem__((1, 0), int(t[0, 0]) + 4), "index entries [0] and [1] overlap at bytes"),
    "half empty": (lambda t, n: t.__setitem__((0, 0), EMPTY), "an empty inner chunk has both 2^64-1"),
    "too long": (lambda t, n: t.__setitem__((0, 1), 17),
                 "index entry [0] is 17 bytes, more than the 16 an inner chunk of [4] can take"),
}


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("defect", sorted(SHARD_DEFECTS))
def test_shard_finds_the_planted_index_entry(tmp_path, defect, location):
    shard = sharded(tmp_path / "s.zarr", location=location)
    assert found(tmp_path / "s.zarr", "NCZ-V3-SHARD", deep=True) == []
    change, expected = SHARD_DEFECTS[defect]
    plant_index(shard, change, location=location)
    got = messages(tmp_path / "s.zarr", "NCZ-V3-SHARD", deep=True)
    assert any(m.startswith("/v/c/0: ") and expected in m for m in got), got
    assert found(tmp_path / "s.zarr", "NCZ-V3-SHARD") == []  # a --deep rule


def test_shard_reports_a_bad_checksum_and_a_short_shard(tmp_path):
    shard = sharded(tmp_path / "s.zarr")
    plant_index(shard, lambda t, n: t.__setitem__((1, 1), 15), crc=False)  # old crc32c kept
    (tmp_path / "s.zarr" / "v" / "c" / "1").write_bytes(b"\x00" * 10)
    got = messages(tmp_path / "s.zarr", "NCZ-V3-SHARD", deep=True)
    assert any(m.startswith("/v/c/0: shard index checksum") for m in got), got
    assert "/v/c/1: shard of 10 bytes is shorter than its 36-byte index" in got


def test_shard_index_is_read_by_range_never_whole(tmp_path, monkeypatch):
    """A 4 MiB shard: --deep reads its 36-byte index by range; no whole read of the shard object."""
    from zarr.codecs import ShardingCodec

    g = zarr.open_group(str(tmp_path / "big.zarr"), mode="w", zarr_format=3)
    a = g.create_array("v", shape=(2**20,), chunks=(2**19,), dtype="int32", dimension_names=["t"],
                       serializer=ShardingCodec(chunk_shape=(2**18,)), compressors=None)
    a[:] = np.arange(2**20, dtype="int32")
    whole: list[str] = []
    ranged: list[tuple[str, int]] = []
    get, get_range = DirectoryStore._get, DirectoryStore._get_range

    def spy_get(self, key, limit=None):
        whole.append(key)
        return get(self, key, limit)

    def spy_range(self, key, start, length):
        ranged.append((key, length))
        return get_range(self, key, start, length)

    monkeypatch.setattr(DirectoryStore, "_get", spy_get)
    monkeypatch.setattr(DirectoryStore, "_get_range", spy_range)
    assert found(tmp_path / "big.zarr", "NCZ-V3-SHARD", deep=True) == []
    assert ("/v/c/0", 36) in ranged and ("/v/c/1", 36) in ranged
    assert [k for k in whole if k.startswith("/v/c/")] == []


def test_a_huge_declared_index_is_refused_before_reading(tmp_path):
    shard = sharded(tmp_path / "h.zarr")
    doc = json.loads((tmp_path / "h.zarr" / "v" / "zarr.json").read_text())
    doc["shape"] = [2**40]
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [2**40]
    doc["codecs"][0]["configuration"]["chunk_shape"] = [1]
    (tmp_path / "h.zarr" / "v" / "zarr.json").write_text(json.dumps(doc))
    assert shard.is_file()
    tracemalloc.start()
    try:
        got = messages(tmp_path / "h.zarr", "NCZ-V3-SHARD", deep=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert any("has a 17592186044420-byte index, more than" in m for m in got), got
    assert peak < 32 * 1024**2


# ---- NCZ-V3-CONSOLIDATED -----------------------------------------------------------------------------------------
def consolidated(path: Path) -> Path:
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    x = g.create_array("x", shape=(4,), chunks=(2,), dtype="float32", fill_value="NaN", dimension_names=["t"])
    x.attrs["units"] = "old"
    g.create_group("sub").create_array("y", shape=(2,), dtype="int16")
    zarr.consolidate_metadata(str(path))
    return path


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_stale_entry_is_found_and_zarr_python_sees_the_stale_copy(tmp_path):
    path = consolidated(tmp_path / "c.zarr")
    _edit(path / "x" / "zarr.json", lambda d: d["attributes"].update(units="new"))
    assert messages(path, "NCZ-V3-CONSOLIDATED") == [
        "/zarr.json: consolidated_metadata entry x is stale, it differs from /x/zarr.json in attributes: readers "
        "using it (ours, zarr-python 3.1.6 and xarray by default) see other metadata than readers that do not"]
    assert zarr.open_group(str(path), mode="r")["x"].attrs["units"] == "old"  # what the finding says


def test_missing_entry_is_found_and_zarr_python_does_not_see_the_node(tmp_path):
    path = consolidated(tmp_path / "c.zarr")
    zarr.open_group(str(path), mode="a").create_array("late", shape=(2,), dtype="int8")
    _edit(path / "zarr.json", lambda d: d["consolidated_metadata"]["metadata"].pop("late", None))
    got = messages(path, "NCZ-V3-CONSOLIDATED")
    assert got == ["/zarr.json: /late/zarr.json is missing from consolidated_metadata: readers using it (ours, "
                   "zarr-python 3.1.6 and xarray by default) do not see it"]
    assert "late" not in zarr.open_group(str(path), mode="r").array_keys()


def test_entry_without_object_and_a_malformed_block(tmp_path):
    path = consolidated(tmp_path / "c.zarr")
    (path / "sub" / "y" / "zarr.json").unlink()
    assert any("consolidated_metadata entry sub/y has no object" in m for m in messages(path, "NCZ-V3-CONSOLIDATED"))
    _edit(path / "zarr.json", lambda d: d["consolidated_metadata"].update(kind="linked", must_understand=True))
    got = messages(path, "NCZ-V3-CONSOLIDATED")
    assert '/zarr.json: consolidated_metadata kind "linked"; the spec says "inline"' in got
    assert any("consolidated_metadata must_understand true" in m for m in got)
    _edit(path / "zarr.json", lambda d: d["consolidated_metadata"].update(metadata=[]))
    assert messages(path, "NCZ-V3-CONSOLIDATED") == [
        "/zarr.json: consolidated_metadata has no 'metadata' object: readers that consolidate refuse the dataset"]


def test_a_fill_value_spelled_otherwise_is_not_stale(tmp_path):
    """Core spec: for float32 ""NaN" is equivalent to "0x7fc00000"": one fill, so the entry is not stale."""
    path = consolidated(tmp_path / "c.zarr")
    _edit(path / "x" / "zarr.json", lambda d: d.update(fill_value="0x7fc00000"))
    assert messages(path, "NCZ-V3-CONSOLIDATED") == []
    _edit(path / "x" / "zarr.json", lambda d: d.update(fill_value=0))
    assert any("differs from /x/zarr.json in fill_value" in m for m in messages(path, "NCZ-V3-CONSOLIDATED"))


# ---- --expect on a v3 store ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("expect", ["zarr-v3", "nz", "nczarr-v3-draft", "nczarr-4.10", "zarr"])
def test_expect_names_the_v3_layout_found_and_fails_on_any_other(tmp_path, expect):
    """``--expect`` holds on Zarr v3 stores as on v2 ones: a store zarr-python wrote is ``zarr-v3``,
    one written as NZ-1.0 is ``nz`` and netcdf-c's draft layout is ``nczarr-v3-draft``; any other
    expectation is NCZ-LAYOUT-FLAVOR (exit 1) naming both. (Before: never reported on v3, exit 0.)"""
    import netCDF4

    src = tmp_path / "s.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    peer = tmp_path / "zarr-v3.zarr"
    root = zarr.open_group(str(peer), mode="w", zarr_format=3)
    root.create_array("v", shape=(3,), dtype="f4", dimension_names=["x"])[:] = [1, 2, 3]
    stores = {"zarr-v3": peer}
    for flavor in ("nz", "nczarr-v3-draft"):
        stores[flavor] = tmp_path / f"{flavor}.zarr"
        done = run("--zarr-format", "3", "--flavor", flavor, "-q", str(src), str(stores[flavor]), module="convert")
        assert done.returncode == 0, done.stderr
    for found, path in stores.items():
        done = run("--expect", expect, "--select", "NCZ-LAYOUT-FLAVOR", str(path))
        if found == expect:
            assert done.returncode == 0 and "NCZ-LAYOUT-FLAVOR" not in done.stdout, done.stdout
        else:
            assert done.returncode == 1, (found, done.stdout, done.stderr)
            assert f"error NCZ-LAYOUT-FLAVOR -: flavor {found}, expected {expect}" in done.stdout, done.stdout


# ---- NCZ-ATTR-NAME-EMPTY on a v3 store -----------------------------------------------------------------------------
def test_an_empty_attribute_name_is_found_in_a_v3_store_as_in_v2(tmp_path):
    """An attribute named "" in a group's and an array's zarr.json: each one finding of the rule the v2 stores have
    (zarr-python writes and reads such a name: the store is valid Zarr, not valid netCDF); the base store has none."""
    path = hand_made(tmp_path / "e.zarr", attributes={"": 1, "foo": 42})
    (path / "zarr.json").write_text(json.dumps({**GROUP, "attributes": {"": "x"}}))
    assert zarr.open_array(str(path / "v"), mode="r").attrs[""] == 1  # the precondition: valid Zarr v3
    why = "an attribute with an empty name: netCDF names are never empty (netcdf-c: NC_EBADNAME)"
    assert messages(path, "NCZ-ATTR-NAME-EMPTY") == [f"/zarr.json: {why}", f"/v/zarr.json: {why}"]
    assert messages(hand_made(tmp_path / "base.zarr"), "NCZ-ATTR-NAME-EMPTY") == []
