"""Zarr v3 check rules (issue #25, check slice): metadata schema, codec chains, shard indexes, consolidated metadata.

Each rule stands on the Zarr v3 core specification 3.1 and its codec and data type documents
(zarr-developers/zarr-specs at fc7dd9c, zarr-developers/zarr-extensions at 4da7b37; CC BY 3.0 Unported).
The text each rule implements is quoted in its helpers' docstrings and kept, with its source and licence,
in docs/spec/zarr-v3-excerpts.txt. Every ``zarr.json`` is read once through the check context (counted,
capped at the metadata bound, parsed without raising); shard indexes are read by byte range, sized from
the metadata, never by reading a shard whole (a shard compressed as a whole by bytes→bytes codecs after
``sharding_indexed`` is the exception: its index is inside the compressed bytes, so the shard is read
within the bound its metadata declares).
"""
from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from nczarr_conformance import keys, limits
from nczarr_conformance.checker.context import CheckContext, is_safe_key
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.errors import NczarrError, StoreUnavailableError
from nczarr_conformance.stores.base import slice_range
from nczarr_conformance.zarr3 import chain as v3chain
from nczarr_conformance.zarr3.metadata import FLAVOR, ZARR_JSON

SPEC = "Zarr v3 core spec 3.1"
ARRAY_KEYS = frozenset({"zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
                        "fill_value", "codecs", "attributes", "storage_transformers", "dimension_names"})
ARRAY_REQUIRED = ("zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
                  "fill_value", "codecs")
GROUP_KEYS = frozenset({"zarr_format", "node_type", "attributes", "consolidated_metadata"})
INTEGERS = {f"{s}int{b}": (b // 8, s == "u") for s in ("", "u") for b in (8, 16, 32, 64)}
FLOATS = {"float16": 2, "float32": 4, "float64": 8}
COMPLEX = {"complex64": 4, "complex128": 8}
RAW = re.compile(r"^r(\d+)$")
HEX = re.compile(r"^0x[0-9a-fA-F]+$")
STRINGS = frozenset({"string", "fixed_length_utf32"})
BYTE_STRINGS = frozenset({"bytes"})
EMPTY = 2**64 - 1
#: findings one shard yields before the rest are counted in one line (a hostile index holds millions)
MAX_SHARD_FINDINGS = 10

# ---- what each reader knows of a codec name (kind: a2a array→array, a2b array→bytes, b2b bytes→bytes) --------
#: zarr-python 3.1.6's codec registry (zarr.registry, with numcodecs.zarr3's entry points);
#: tests/zarr3/test_check_v3.py compares it with the installed zarr-python
ZARR_PYTHON_CODECS = {
    "transpose": "a2a", "bytes": "a2b", "endian": "a2b", "sharding_indexed": "a2b", "vlen-utf8": "a2b",
    "vlen-bytes": "a2b", "blosc": "b2b", "gzip": "b2b", "zstd": "b2b", "crc32c": "b2b",
    **{f"numcodecs.{n}": "a2a" for n in ("astype", "bitround", "delta", "fixedscaleoffset", "packbits", "quantize")},
    **{f"numcodecs.{n}": "a2b" for n in ("pcodec", "zfpy")},
    **{f"numcodecs.{n}": "b2b" for n in ("adler32", "blosc", "bz2", "crc32", "crc32c", "fletcher32", "gzip",
                                         "jenkins_lookup3", "lz4", "lzma", "shuffle", "zlib", "zstd")},
}
#: TensorStore 0.1.86's zarr3 driver: every other name fails ``"<name>" is not registered`` (tests/zarr3/
#: test_check_v3.py::test_tensorstore_refuses_what_the_finding_says opens each with TensorStore)
TENSORSTORE_CODECS = frozenset({"transpose", "bytes", "sharding_indexed", "blosc", "gzip", "zstd", "crc32c"})
#: the core spec's codecs and those registered in zarr-extensions (codecs/, at 4da7b37): a name outside them
#: is "unknown" ("each codec must have a conformant identifier", registered "prior to release")
REGISTERED_CODECS = frozenset({"bytes", "transpose", "sharding_indexed", "blosc", "gzip", "crc32c", "zstd",
                               "vlen-utf8", "vlen-bytes", "bitround", "cast_value", "conditional", "n5_default",
                               "packbits", "reshape", "scale_offset", "zfp"})
#: codecs whose encoded size does not depend on the values (allowed in ``index_codecs``)
FIXED_SIZE = frozenset({"transpose", "bytes", "crc32c", "numcodecs.crc32", "numcodecs.crc32c", "numcodecs.adler32",
                        "numcodecs.fletcher32", "numcodecs.jenkins_lookup3"})


def _ours_reads(name: str, kind: str | None) -> bool:
    """Whether our reader (zarr3/chain.py) decodes a codec of this name in this position."""
    if name in v3chain.ARRAY_TO_BYTES or name in v3chain.ARRAY_TO_ARRAY or name in ("gzip", "zstd", "blosc", "crc32c"):
        return True
    if not (name.startswith("numcodecs.") and kind == "b2b"):
        return False
    import numcodecs  # only a v3 store naming a numcodecs.* codec pays for it (~45 ms and an entry-point scan)

    return name.removeprefix("numcodecs.") in numcodecs.registry.codec_registry


def _readers_of(name: str) -> tuple[list[str], list[str]]:
    """(readers that refuse the codec name, readers that read it)."""
    kind = ZARR_PYTHON_CODECS.get(name)
    verdicts = {"zarr-python 3.1.6": name in ZARR_PYTHON_CODECS, "TensorStore 0.1.86": name in TENSORSTORE_CODECS,
                "nczarr-conformance": _ours_reads(name, kind)}
    return [r for r, ok in verdicts.items() if not ok], [r for r, ok in verdicts.items() if ok]


# ---- the v3 nodes of a store, listed once per check ---------------------------------------------------------
@dataclass
class V3Nodes:
    """Every ``zarr.json`` of the store by node path ('/' the root), parsed through the check context."""

    docs: dict[str, Any]  # node → parsed JSON (None: missing, unreadable or not JSON; recorded in the context)


def nodes(ctx: CheckContext) -> V3Nodes:
    """The store's v3 metadata documents. The context lists a store only when a v2 root is there, so a
    v3 store is listed here (once), and its keys become the context's objects."""
    cached = ctx.__dict__.get("v3_nodes")
    if isinstance(cached, V3Nodes):
        return cached
    if not ctx.objects:
        listed = ctx.store.list_prefix("/")
        ctx.unsafe_keys.extend(k for k in listed if not is_safe_key(k))
        ctx.objects = [k for k in listed if is_safe_key(k)]
        ctx.object_set = set(ctx.objects)
    found = V3Nodes({keys.parent(k): ctx.json(k) for k in ctx.objects if keys.basename(k) == ZARR_JSON})
    ctx.__dict__["v3_nodes"] = found
    return found


def _meta_key(node: str) -> str:
    return keys.join(node, ZARR_JSON)


def _arrays(ctx: CheckContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """(node, document) of every array whose ``zarr.json`` is a JSON object saying node_type "array"."""
    for node, doc in sorted(nodes(ctx).docs.items()):
        if isinstance(doc, dict) and doc.get("node_type") == "array":
            yield node, doc


# ---- NCZ-V3-SCHEMA --------------------------------------------------------------------------------------------
@rule("NCZ-V3-SCHEMA", Severity.ERROR, source=f'{SPEC} "Metadata", "Data types", "Node names"; '
      "regular grid, default/v2 chunk key encodings")
def v3_schema(ctx: CheckContext) -> Iterator[Finding]:
    """Each zarr.json has the members the v3 core spec requires, each of its JSON type (shape, grid, fill_value...)."""
    if ctx.flavor != FLAVOR:
        return
    finding = get("NCZ-V3-SCHEMA").finding
    for node, doc in sorted(nodes(ctx).docs.items()):
        key = _meta_key(node)
        for problem in _document_problems(ctx, node, key, doc):
            yield finding(key, problem)


def _document_problems(ctx: CheckContext, node: str, key: str, doc: Any) -> Iterator[str]:
    if key in ctx.read_errors:
        yield f"cannot be read: {ctx.read_errors[key]}"
        return
    if key in ctx.json_errors:
        yield f"not valid JSON: {ctx.json_errors[key]}"
    if key in ctx.too_deep:
        yield f"{ctx.too_deep[key]}; readers refuse it"
    if key in ctx.constants:
        yield (f"bare {', '.join(sorted(ctx.constants[key]))} literal: not JSON (RFC 8259); the spec spells a "
               'float fill_value "NaN", "Infinity" or "-Infinity"')
    if doc is None:
        return
    if not isinstance(doc, dict):
        yield f"JSON {type(doc).__name__} found; an object is required"
        return
    yield from _name_problems(node)
    yield from _common_problems(doc)
    kind = doc.get("node_type")
    if kind == "array":
        yield from _array_problems(doc)
    elif kind == "group":
        yield from _unknown_members(doc, GROUP_KEYS)


def _name_problems(node: str) -> Iterator[str]:
    """Core spec, "Node names": a name "must not be a string composed only of period characters", "must not
    start with the reserved prefix "__"" and "must not be "zarr.json"" (the '/' and empty-name rules hold
    for any key a store lists)."""
    for name in keys.split(node):
        if name.startswith("__"):
            yield f"node name {name!r} starts with the reserved prefix '__'"
        elif name == ZARR_JSON:
            yield f"node name {name!r} is reserved"


def _common_problems(doc: dict[str, Any]) -> Iterator[str]:
    """``zarr_format``: "An integer ... must be 3 here"; ``node_type``: "must be array" or "group";
    ``attributes``: "The value must be an object"."""
    fmt = doc.get("zarr_format")
    if "zarr_format" not in doc:
        yield "zarr_format is missing; it must be 3"
    elif not isinstance(fmt, int) or isinstance(fmt, bool) or fmt != 3:
        yield f"zarr_format {json.dumps(fmt)}: it must be the integer 3"
    if doc.get("node_type") not in ("array", "group"):
        yield f"node_type {json.dumps(doc.get('node_type'))}: it must be \"array\" or \"group\""
    if "attributes" in doc and not isinstance(doc["attributes"], dict):
        yield f"attributes {_short(doc['attributes'])}: the value must be an object"


def _unknown_members(doc: dict[str, Any], known: frozenset[str]) -> Iterator[str]:
    """Core spec, "must_understand": "An implementation MUST fail to open Zarr groups or arrays if any metadata
    fields are present which (a) the implementation does not recognize and (b) are not explicitly set to
    "must_understand": false"."""
    for name in sorted(set(doc) - known):
        value = doc[name]
        if not (isinstance(value, dict) and value.get("must_understand") is False):
            yield (f"unknown member {name!r} without \"must_understand\": false: the spec has readers refuse the "
                   "node")


def _array_problems(doc: dict[str, Any]) -> Iterator[str]:
    for name in ARRAY_REQUIRED:
        if name not in doc:
            yield f"{name} is missing; the spec requires it of an array"
    yield from _unknown_members(doc, ARRAY_KEYS)
    shape = doc.get("shape")
    rank = len(shape) if _ints(shape, 0) else None
    if "shape" in doc and rank is None:
        yield f"shape {_short(shape)}: it must be a list of integers >= 0"
    yield from _data_type_problems(doc.get("data_type"), "data_type" in doc)
    yield from _grid_problems(doc.get("chunk_grid"), rank, "chunk_grid" in doc)
    yield from _key_encoding_problems(doc.get("chunk_key_encoding"), "chunk_key_encoding" in doc)
    if "fill_value" in doc:
        problem = _fill_problem(doc["fill_value"], doc.get("data_type"))
        if problem:
            yield f"fill_value {_short(doc['fill_value'])}: {problem}"
    codecs = doc.get("codecs")
    if "codecs" in doc and (not isinstance(codecs, list) or not codecs):
        yield f"codecs {_short(codecs)}: it must be a non-empty list (it holds the array→bytes codec)"
    elif isinstance(codecs, list):
        yield from (f"codecs[{i}] {p}" for i, c in enumerate(codecs) for p in _extension_problems(c))
    yield from _dimension_name_problems(doc, rank)
    transformers = doc.get("storage_transformers")
    if transformers is not None and not isinstance(transformers, list):
        yield f"storage_transformers {_short(transformers)}: it must be a list"


def _ints(value: Any, minimum: int) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                                           for v in value)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _extension_problems(value: Any) -> Iterator[str]:
    """Core spec, "Extension definition": an object whose "member name MUST be a plain string"; "Optionally,
    the member configuration MAY be present but if so MUST be an object"; or a short-hand name string."""
    if isinstance(value, str):
        return
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        yield f"{_short(value)}: an extension is a name or an object with a string \"name\""
    elif "configuration" in value and not isinstance(value["configuration"], dict):
        yield f"{value['name']!r}: configuration {_short(value['configuration'])} must be an object"


def _name_config(value: Any) -> tuple[str | None, dict[str, Any]]:
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        config = value.get("configuration", {})
        return value["name"], config if isinstance(config, dict) else {}
    return None, {}


def _data_type_problems(value: Any, present: bool) -> Iterator[str]:
    if present:
        yield from (f"data_type {p}" for p in _extension_problems(value))


def _grid_problems(grid: Any, rank: int | None, present: bool) -> Iterator[str]:
    """Core spec, "chunk_grid": for the regular grid "the value must be an object with the names name and
    configuration ... chunk_shape must be an array of integers"; regular grid: "Chunk sizes must be greater
    than zero" and "The dimensionality of the grid is the same as the dimensionality of the array"."""
    if not present:
        return
    name, config = _name_config(grid)
    if name != "regular":
        yield (f"chunk_grid {_short(grid)}: not the core \"regular\" grid; readers that do not know it refuse "
               "the array")
        return
    chunk_shape = config.get("chunk_shape")
    if not _ints(chunk_shape, 1):
        yield f"chunk_grid chunk_shape {_short(chunk_shape)}: it must be a list of integers >= 1"
    elif rank is not None and len(chunk_shape) != rank:
        yield f"chunk_grid chunk_shape {_short(chunk_shape)} has {len(chunk_shape)} dimensions; shape has {rank}"


def _key_encoding_problems(value: Any, present: bool) -> Iterator[str]:
    """default and v2 chunk key encodings: "The configuration object may contain one optional member,
    separator, which must be either "/" or "."."""
    if not present:
        return
    name, config = _name_config(value)
    if name not in ("default", "v2"):
        yield (f"chunk_key_encoding {_short(value)}: neither \"default\" nor \"v2\"; readers that do not know it "
               "refuse the array")
    elif config.get("separator", "/" if name == "default" else ".") not in ("/", "."):
        yield f"chunk_key_encoding separator {_short(config.get('separator'))}: it must be \"/\" or \".\""


def _dimension_name_problems(doc: dict[str, Any], rank: int | None) -> Iterator[str]:
    """Core spec, "dimension_names": "If specified, must be an array of strings or null objects" as long as
    shape ("with the same length as shape")."""
    if "dimension_names" not in doc:
        return
    names = doc["dimension_names"]
    if not isinstance(names, list) or not all(n is None or isinstance(n, str) for n in names):
        yield f"dimension_names {_short(names)}: it must be a list of strings or nulls"
    elif rank is not None and len(names) != rank:
        yield f"dimension_names {_short(names)} has {len(names)} names; shape has {rank} dimensions"


def _fill_problem(value: Any, data_type: Any) -> str | None:
    """Data types, "Permitted fill values" (core) and the registered ``string``, ``bytes`` and
    ``fixed_length_utf32`` types; None when the value fits, or the type's fill has no document we hold."""
    name = _name_config(data_type)[0]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # a bare NaN/Infinity literal: reported once for the whole document
    if name == "bool":
        return None if isinstance(value, bool) else "a bool array's fill_value must be true or false"
    if name in INTEGERS:
        return _integer_fill(value, *INTEGERS[name])
    if name in FLOATS:
        return _float_fill(value, FLOATS[name])
    if name in COMPLEX:
        if isinstance(value, list) and len(value) == 2:
            return _float_fill(value[0], COMPLEX[name]) or _float_fill(value[1], COMPLEX[name])
        return "a complex fill_value must be a two-element array [real, imaginary]"
    if name in STRINGS:
        return None if isinstance(value, str) else f"a {name} array's fill_value must be a string"
    if name in BYTE_STRINGS:
        return _bytes_fill(value, None)
    raw = RAW.match(name or "")
    if raw:
        return _bytes_fill(value, int(raw.group(1)))
    return None


def _integer_fill(value: Any, size: int, unsigned: bool) -> str | None:
    """Integers: "The value must be a JSON number with no fraction or exponent part that is within the
    representable range of the data type"."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "an integer fill_value must be a JSON number with no fraction or exponent"
    low, high = (0, 2 ** (8 * size) - 1) if unsigned else (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
    return None if low <= value <= high else f"out of the data type's range {low}..{high}"


def _float_fill(value: Any, size: int) -> str | None:
    """Floats: a JSON number, or "Infinity", "-Infinity", "NaN", or "0xYYYYYYYY", "the byte representation of
    the floating point number as an unsigned integer"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    if value in ("NaN", "Infinity", "-Infinity"):
        return None
    if isinstance(value, str) and HEX.match(value):
        return None if int(value, 16) < 2 ** (8 * size) else f"hex form wider than the type's {size} bytes"
    return 'a float fill_value must be a number, "NaN", "Infinity", "-Infinity" or a "0x..." hex form'


def _bytes_fill(value: Any, bits: int | None) -> str | None:
    """``bytes``: "an array of integers from the closed interval [0, 255]" or "a string produced by applying
    base64 encoding"; ``r<N>``: "An array of integers, with length equal to <N>, where each integer is in the
    range [0, 255]" (N counts bits; a byte per integer gives N/8 of them, so either length is taken)."""
    if isinstance(value, str) and bits is None:
        import base64
        import binascii

        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return "neither a list of bytes nor base64 text"
        return None
    if not _ints(value, 0) or any(v > 255 for v in value):
        return "it must be a list of integers in 0..255" + ("" if bits is not None else " or base64 text")
    if bits is not None and len(value) not in (bits, bits // 8):
        return f"{len(value)} bytes; an r{bits} fill_value holds {bits // 8}"
    return None


# ---- NCZ-V3-CODECS --------------------------------------------------------------------------------------------
@rule("NCZ-V3-CODECS", Severity.ERROR, source=f'{SPEC} "Codecs"; bytes and sharding_indexed codecs; zarr-python '
      "3.1.6 and TensorStore 0.1.86 codec registries (tests/zarr3/test_check_v3.py)")
def v3_codecs(ctx: CheckContext) -> Iterator[Finding]:
    """Codec chains: array→array codecs, one array→bytes codec, bytes→bytes codecs; names each reader knows."""
    if ctx.flavor != FLAVOR:
        return
    r = get("NCZ-V3-CODECS")
    for node, doc in _arrays(ctx):
        codecs, shape = doc.get("codecs"), doc.get("shape")
        grid = _name_config(doc.get("chunk_grid"))[1].get("chunk_shape")
        if not isinstance(codecs, list) or not _ints(shape, 0):
            continue  # NCZ-V3-SCHEMA reports it
        chunk_shape = grid if _ints(grid, 1) and len(grid) == len(shape) else None
        dtype = _name_config(doc.get("data_type"))[0]
        for severity, problem in _chain_problems(codecs, dtype, len(shape), chunk_shape, "codecs"):
            yield r.finding(_meta_key(node), problem, severity)


Problem = tuple[Severity | None, str]


def _chain_problems(codecs: list[Any], dtype: str | None, rank: int, chunk_shape: list[int] | None,
                    where: str) -> Iterator[Problem]:
    """Core spec, "Codecs": "the list of codecs must be of the following form: zero or more array -> array
    codecs; followed by exactly one array -> bytes codec; followed by zero or more bytes -> bytes codecs"."""
    parsed = [_name_config(c) for c in codecs]
    kinds = [ZARR_PYTHON_CODECS.get(n) if n else None for n, _ in parsed]
    a2b = [i for i, k in enumerate(kinds) if k == "a2b"]
    if len(a2b) > 1 or (not a2b and None not in kinds):
        names = [parsed[i][0] for i in a2b]
        yield None, f"{where}: {len(a2b)} array→bytes codecs {names}; exactly one is required"
    if a2b:
        first, last = a2b[0], a2b[-1]
        for i, ((name, _), kind) in enumerate(zip(parsed, kinds, strict=True)):
            if (kind == "a2a" and i > first) or (kind == "b2b" and i < last):
                side = "after" if kind == "a2a" else "before"
                yield None, (f"{where}[{i}] {name!r} is {'array→array' if kind == 'a2a' else 'bytes→bytes'} "
                             f"but comes {side} the array→bytes codec")
    for i, (name, config) in enumerate(parsed):
        if name is None:
            continue  # NCZ-V3-SCHEMA reports it
        yield from _codec_problems(name, config, dtype, rank, chunk_shape, f"{where}[{i}] {name!r}")


def _codec_problems(name: str, config: dict[str, Any], dtype: str | None, rank: int,
                    chunk_shape: list[int] | None, where: str) -> Iterator[Problem]:
    yield from _support_problems(name, where)
    if name == "bytes":
        yield from _bytes_problems(config, dtype, where)
    elif name in ("vlen-utf8", "vlen-bytes"):
        wanted = "string" if name == "vlen-utf8" else "bytes"
        if dtype is not None and dtype != wanted and dtype not in ("variable_length_utf8", "variable_length_bytes"):
            yield None, f"{where} encodes data_type {wanted!r}, not {dtype!r}"
    elif name == "transpose":
        order = config.get("order")
        if not _ints(order, 0) or sorted(order) != list(range(rank)):
            yield None, f"{where}: order {_short(order)} is not a permutation of the {rank} axes"
    elif name == "sharding_indexed":
        yield from _sharding_problems(config, dtype, rank, chunk_shape, where)


def _support_problems(name: str, where: str) -> Iterator[Problem]:
    """A codec no reader knows is an error; one outside the core spec and zarr-extensions' registry that some
    readers know is a warning naming those that refuse it (TensorStore refuses every ``numcodecs.*`` name)."""
    refused, reading = _readers_of(name)
    if not reading:
        yield None, f"{where} is unknown: {_and(refused)} refuse it"
    elif refused and name not in REGISTERED_CODECS:
        yield Severity.WARNING, (f"{where} is neither a core Zarr v3 codec nor a registered one: {_and(refused)} "
                                 f"refuse{'s' if len(refused) == 1 else ''} it ({_and(reading)} read"
                                 f"{'s' if len(reading) == 1 else ''} it)")


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _item_size(dtype: str | None) -> int | None:
    if dtype in INTEGERS:
        return INTEGERS[dtype][0]
    if dtype in FLOATS:
        return FLOATS[dtype]
    if dtype in COMPLEX:
        return COMPLEX[dtype]  # per component: endianness applies
    return None


def _bytes_problems(config: dict[str, Any], dtype: str | None, where: str) -> Iterator[Problem]:
    """bytes codec, "endian": "Required for data types for which endianness is applicable. For example, this
    includes multi-byte data types, such as uint16 and int32 ... If present, the value MUST be a string equal
    to either "big" or "little"." It encodes "arrays of fixed-size numeric data types"."""
    endian = config.get("endian")
    if "endian" in config and endian not in ("big", "little"):
        yield None, f"{where}: endian {_short(endian)}; it must be \"big\" or \"little\""
    size = _item_size(dtype)
    if endian is None and size is not None and size > 1:
        yield None, f"{where}: no endian for the {size}-byte data_type {dtype!r}; the spec requires one"
    if dtype in ("string", "bytes", "variable_length_utf8", "variable_length_bytes"):
        yield None, f"{where} cannot encode the variable-length data_type {dtype!r} (vlen-utf8/vlen-bytes do)"


def _sharding_problems(config: dict[str, Any], dtype: str | None, rank: int, shard: list[int] | None,
                       where: str) -> Iterator[Problem]:
    """sharding_indexed: ``chunk_shape`` "must match the number of dimensions of the shard shape" and "must
    evenly divide the size of the shard shape"; ``codecs`` "is required and needs to contain exactly one array
    -> bytes codec"; ``index_codecs`` likewise, and "Codecs that produce variable-sized encoded representation,
    such as compression codecs, MUST NOT be used for index codecs"; ``index_location`` "must be either the
    string start or end"."""
    inner = config.get("chunk_shape")
    if not _ints(inner, 1) or len(inner) != rank:
        yield None, f"{where}: chunk_shape {_short(inner)} is not {rank} integers >= 1"
        inner = None
    elif shard is not None and any(s % c for s, c in zip(shard, inner, strict=True)):
        yield None, f"{where}: inner chunk_shape {inner} does not divide the shard shape {shard}"
    for member in ("codecs", "index_codecs"):
        chain = config.get(member)
        if not isinstance(chain, list) or not chain:
            yield None, f"{where}: {member} {_short(chain)} must be a non-empty list"
            continue
        if member == "codecs":
            yield from _chain_problems(chain, dtype, rank, inner, f"{where} codecs")
            continue
        yield from _chain_problems(chain, "uint64", rank + 1, None, f"{where} index_codecs")
        for i, c in enumerate(chain):
            name = _name_config(c)[0]
            if name is not None and name not in FIXED_SIZE:
                yield None, (f"{where} index_codecs[{i}] {name!r} may change the index's size; the spec allows "
                             "only fixed-size codecs there")
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        yield None, f"{where}: index_location {_short(location)}; it must be \"start\" or \"end\""


# ---- NCZ-V3-SHARD (--deep) ------------------------------------------------------------------------------------
@rule("NCZ-V3-SHARD", Severity.ERROR, deep=True,
      source='sharding_indexed codec spec "Binary shard format"; ZEP0002')
def v3_shard(ctx: CheckContext) -> Iterator[Finding]:
    """Every shard's index decodes and each inner chunk's offset and length lie inside the shard, none overlapping."""
    if ctx.flavor != FLAVOR:
        return
    r = get("NCZ-V3-SHARD")
    for node, doc in _arrays(ctx):
        built = _sharded_chain(doc, node)
        if built is None:
            continue
        chain, encoding_name, separator, grid = built
        for shard_key in _shard_keys(ctx, node, encoding_name, separator, grid):
            for problem in _shard_problems(ctx, chain, shard_key):
                yield r.finding(shard_key, problem)


def _sharded_chain(doc: dict[str, Any], node: str) -> tuple[v3chain.Chain, str, str, tuple[int, ...]] | None:
    """The array's checked chain, key encoding and shard grid when it is sharded and its metadata reads."""
    from nczarr_conformance.zarr3.metadata import (
        int_tuple,
        parse_data_type,
        parse_key_encoding,
        regular_chunk_shape,
    )

    where = _meta_key(node)
    try:
        shape = int_tuple(doc.get("shape"), "shape", where, 0)
        dtype = parse_data_type(doc.get("data_type"), where)
        shard = regular_chunk_shape(doc.get("chunk_grid"), len(shape), where)
        encoding = parse_key_encoding(doc.get("chunk_key_encoding"), where)
        chain = v3chain.build_chain(doc.get("codecs"), dtype, shard, where)
    except StoreUnavailableError:
        raise
    except NczarrError:
        return None  # NCZ-V3-SCHEMA / NCZ-V3-CODECS / NCZ-V3-READ report why
    if chain.sharding is None:
        return None
    grid = tuple(-(-n // s) for n, s in zip(shape, shard, strict=True))
    return chain, encoding.name, encoding.separator, grid


def _shard_keys(ctx: CheckContext, node: str, encoding: str, separator: str,
                grid: tuple[int, ...]) -> Iterator[str]:
    """Keys of the array's objects that name a shard of its grid (default: ``c/1/2``; v2: ``1.2``)."""
    prefix = node.rstrip("/") + "/"
    for key in ctx.objects:
        if not key.startswith(prefix) or keys.basename(key) == ZARR_JSON:
            continue
        parts = key[len(prefix):].split(separator)
        if encoding == "default":
            if parts[0] != "c":
                continue
            parts = parts[1:]
        elif parts == ["0"] and not grid:
            parts = []
        if len(parts) == len(grid) and all(p.isdigit() and int(p) < g for p, g in zip(parts, grid, strict=True)):
            yield key


def _shard_problems(ctx: CheckContext, chain: v3chain.Chain, key: str) -> list[str]:
    """The index of one shard read (by range: its declared size, from the start or the end) and checked."""
    sharding = chain.sharding
    assert sharding is not None
    size = sharding.index_nbytes
    if size > limits.max_in_memory_bytes():
        return [f"a shard of {list(sharding.per_shard)} inner chunks has a {size}-byte index, more than "
                f"{limits.max_in_memory_bytes()} (NCZARR_MAX_IN_MEMORY); not checked, readers refuse it"]
    ctx.objects_read += 1
    try:
        if chain.compressors:  # the index is inside bytes compressed whole: read within the declared bound
            whole = ctx.store.get(key, limit=chain.max_encoded())
            data = None if whole is None else chain.decompress(whole, key, sharding.max_shard_nbytes)
            got = None if data is None else (slice_range(data, 0 if sharding.index_at_start else -size, size),
                                             len(data))
        else:
            got = ctx.store.get_range(key, 0 if sharding.index_at_start else -size, size)
    except StoreUnavailableError:
        raise
    except NczarrError as exc:
        return [str(exc)]
    if got is None:
        return []
    raw, total = got
    if total < size or len(raw) != size:
        return [f"shard of {total} bytes is shorter than its {size}-byte index"]
    try:
        table = sharding.decode_index(raw, key)
    except NczarrError as exc:
        return [str(exc).removeprefix(f"{key}: ")]
    lo, hi = (size, total) if sharding.index_at_start else (0, total - size)
    return _entry_problems(table.reshape(-1, 2), sharding, lo, hi)


def _entry_problems(entries: np.ndarray, sharding: v3chain.Sharding, lo: int, hi: int) -> list[str]:
    """sharding_indexed: "The offset[i] specifies the byte offset within the shard at which the encoded
    representation of chunk i begins, and nbytes[i] specifies the encoded length in bytes"; "Empty inner
    chunks are denoted by setting both offset and nbytes to 2^64 - 1". Inner chunks lie in the shard outside
    its index ("unused space between them is allowed"); two that share bytes cannot both be right."""
    problems: list[str] = []
    used: list[tuple[int, int, tuple[int, ...]]] = []
    bound = sharding.inner.max_encoded()
    for flat, (offset, length) in enumerate(entries.tolist()):
        at = list(np.unravel_index(flat, sharding.per_shard)) if sharding.per_shard else []
        position = [int(i) for i in at]
        if offset == EMPTY and length == EMPTY:
            continue
        if EMPTY in (offset, length):
            problems.append(f"index entry {position}: offset {offset}, length {length}; an empty inner chunk has "
                            "both 2^64-1")
        elif offset < lo or offset + length > hi:
            problems.append(f"index entry {position} points at bytes {offset}..{offset + length}, outside the "
                            f"shard's data ({lo}..{hi})")
        elif length > bound:
            problems.append(f"index entry {position} is {length} bytes, more than the {bound} an inner chunk of "
                            f"{list(sharding.inner.chunk_shape)} can take")
        else:
            used.append((offset, offset + length, tuple(position)))
    used.sort()
    for (_, end, first), (start, _, second) in itertools.pairwise(used):
        if start < end:
            problems.append(f"index entries {list(first)} and {list(second)} overlap at bytes {start}..{end}")
    if len(problems) > MAX_SHARD_FINDINGS:
        extra = len(problems) - MAX_SHARD_FINDINGS
        problems = [*problems[:MAX_SHARD_FINDINGS], f"and {extra} more index entries of this shard are wrong"]
    return problems


# ---- NCZ-V3-CONSOLIDATED --------------------------------------------------------------------------------------
CONSOLIDATED_READERS = "readers using it (ours, zarr-python 3.1.6 and xarray by default)"


@rule("NCZ-V3-CONSOLIDATED", Severity.ERROR,
      source=f'{SPEC} "Additional fields"; zarr-python consolidate_metadata; zarr-python, xarray and ours trust it')
def v3_consolidated(ctx: CheckContext) -> Iterator[Finding]:
    """consolidated_metadata in the root zarr.json holds every node's zarr.json as stored: its readers see only it."""
    if ctx.flavor != FLAVOR:
        return
    root = nodes(ctx).docs.get("/")
    block = root.get("consolidated_metadata") if isinstance(root, dict) else None
    if block is None:
        return
    finding = get("NCZ-V3-CONSOLIDATED").finding
    key = _meta_key("/")
    meta = block.get("metadata") if isinstance(block, dict) else None
    if not isinstance(meta, dict):
        yield finding(key, "consolidated_metadata has no 'metadata' object: readers that consolidate refuse the "
                      "dataset")
        return
    yield from (finding(key, p) for p in _block_problems(block))
    entries = {keys.join(k): v for k, v in meta.items() if isinstance(k, str)}
    docs = nodes(ctx).docs
    for node, value in sorted(entries.items()):
        if node not in docs:
            yield finding(key, f"consolidated_metadata entry {node.lstrip('/')} has no object: {CONSOLIDATED_READERS} "
                          "see a node that does not exist")
            continue
        differing = None if docs[node] is None else _differing(value, docs[node])
        if differing:
            yield finding(key, f"consolidated_metadata entry {node.lstrip('/')} is stale, it differs from "
                          f"{_meta_key(node)} in {differing}: {CONSOLIDATED_READERS} see other metadata than "
                          "readers that do not")
    for node in sorted(docs):
        if node != "/" and node not in entries:
            yield finding(key, f"{_meta_key(node)} is missing from consolidated_metadata: {CONSOLIDATED_READERS} do "
                          "not see it")


def _block_problems(block: dict[str, Any]) -> Iterator[str]:
    """Core spec, "Additional fields": "If present, its value MUST be a JSON object with the following structure:
    {"must_understand": false, "kind": "inline", "metadata": {...}}"."""
    if block.get("kind") != "inline":
        yield f"consolidated_metadata kind {_short(block.get('kind'))}; the spec says \"inline\""
    if block.get("must_understand") is not False:
        yield (f"consolidated_metadata must_understand {_short(block.get('must_understand'))}; the spec says false "
               "(readers that do not consolidate must be free to ignore it)")


def _differing(entry: Any, stored: Any) -> str:
    """The top-level members whose values differ (``+k`` only in the object, ``-k`` only in the entry); "" if none.

    Values compare as parsed JSON, except ``fill_value``, which compares by the value it means for the data
    type ("NaN" and its hex form are one fill), and a group's own ``consolidated_metadata``, which
    zarr-python writes into each group entry (empty) and not into the group's object.
    """
    if not isinstance(entry, dict) or not isinstance(stored, dict):
        return "" if _canonical(entry) == _canonical(stored) else "its whole value"
    names = []
    for k in sorted((set(entry) | set(stored)) - {"consolidated_metadata"}):
        if k not in entry:
            names.append(f"+{k}")
        elif k not in stored:
            names.append(f"-{k}")
        elif _canonical(entry[k]) != _canonical(stored[k]) and not (k == "fill_value" and _same_fill(entry, stored)):
            names.append(k)
    return ", ".join(names)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _same_fill(entry: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether two fill_values of one data type mean one value (NaN as NaN, the sign of zero kept)."""
    from nczarr_conformance.zarr3.metadata import parse_data_type, parse_fill

    if _canonical(entry.get("data_type")) != _canonical(stored.get("data_type")):
        return False
    try:
        dtype = parse_data_type(stored.get("data_type"), "")
        a, b = (parse_fill(doc.get("fill_value"), dtype, "") for doc in (entry, stored))
    except NczarrError:
        return False  # a fill that does not parse compares by its spelling (NCZ-V3-SCHEMA reports it)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


# ---- what other readers do with a Zarr v3 store (predictions, each run against its reader in
# tests/check/test_interop.py) ----------------------------------------------------------------------------------
@rule("NCZ-V3-INTEROP-GDAL", Severity.WARNING, source="GDAL 3.6 Zarr driver; tests/check/test_interop.py")
def v3_gdal(ctx: CheckContext) -> Iterator[Finding]:
    """GDAL 3.6 reads an older Zarr v3 draft: it shows none of a v3 store's arrays or attributes."""
    if nodes(ctx).docs:
        yield get("NCZ-V3-INTEROP-GDAL").finding(
            "/zarr.json", "GDAL 3.6 shows none of this Zarr v3 store's arrays (it reads an older v3 draft)")


#: the v3 data types TensorStore's zarr3 driver has no counterpart for
TS_V3_REFUSED = frozenset({"string", "null_terminated_bytes", "fixed_length_utf32", "bytes"})


@rule("NCZ-V3-INTEROP-TS-TEXT", Severity.WARNING, source="TensorStore zarr3 driver; tests/check/test_interop.py")
def v3_ts_text(ctx: CheckContext) -> Iterator[Finding]:
    """TensorStore's zarr3 driver refuses the text data types (string, null_terminated_bytes): char and string
    variables of a v3 store."""
    for node, doc in _arrays(ctx):
        name, _ = _name_config(doc.get("data_type"))
        if name in TS_V3_REFUSED:
            yield get("NCZ-V3-INTEROP-TS-TEXT").finding(
                _meta_key(node), f"TensorStore cannot open this array: data type {name} is not one it reads")
