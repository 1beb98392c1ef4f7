"""One-feature cases with their intended models, written here (the corpus cases: parsed from netcdf-c's own CDL
baselines), never derived from a reader or writer under test."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.peers.capabilities import FEATURES
from nczarr_conformance.resources import netcdf_c_corpus


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    build: Callable[[], Dataset]
    #: writer options only some writers can honour ("separator", "order")
    options: dict[str, str] = field(default_factory=dict)
    #: the capabilities (peers/capabilities.py FEATURES) a writer and a reader must both declare for
    #: the cell to run; the matrix never picks a case by an implementation's id
    requires: frozenset[str] = frozenset()

    def model(self) -> Dataset:
        return self.build()


def _needs(*features: str) -> frozenset[str]:
    """The features a case needs; a name outside the vocabulary is a programming error."""
    unknown = set(features) - set(FEATURES)
    if unknown:
        raise ValueError(f"not a feature of peers/capabilities.py: {sorted(unknown)}")
    return frozenset(features)


def _root(**dims: int) -> Group:
    return Group({name: Dimension(size) for name, size in dims.items()})


def numeric_types() -> Dataset:
    g = _root(x=3)
    for code, nctype in [("i1", "byte"), ("u1", "ubyte"), ("i2", "short"), ("u2", "ushort"), ("i4", "int"),
                         ("u4", "uint"), ("i8", "int64"), ("u8", "uint64"), ("f4", "float"), ("f8", "double")]:
        info = np.iinfo(code) if code[0] in "iu" else np.finfo(code)
        g.variables[f"v_{nctype}"] = Variable(nctype, ["/x"], (3,), {}, np.array([info.min, info.max, 0], code))
    return Dataset(g)


def char_var() -> Dataset:
    g = _root(x=3, n=4)
    g.variables["c"] = Variable("char", ["/x", "/n"], (3, 4), {},
                                np.array([b"ab\0\0", b"cdef", b"\0\0\0\0"]).view("S1").reshape(3, 4))
    return Dataset(g)


def string_var() -> Dataset:
    g = _root(x=3)
    g.variables["s"] = Variable("string", ["/x"], (3,), {}, np.array(["", "ascii", "ünïcødé"], dtype=object))
    return Dataset(g)


def long_string() -> Dataset:
    g = _root(x=2)
    g.variables["s"] = Variable("string", ["/x"], (2,), {}, np.array(["a" * 200, "b"], dtype=object))
    return Dataset(g)


def scalar() -> Dataset:
    g = Group()
    g.variables["d"] = Variable("double", [], (), {}, np.array(2.5))
    g.variables["i"] = Variable("int", [], (), {}, np.array(-7, dtype="i4"))
    return Dataset(g)


def groups_nested() -> Dataset:
    g = _root(x=2)
    g.variables["top"] = Variable("int", ["/x"], (2,), {}, np.array([1, 2], dtype="i4"))
    g1 = Group({"y": Dimension(3)}, attributes={"where": Attribute("char", "g1")})
    g1.variables["w"] = Variable("short", ["/x", "/g1/y"], (2, 3), {}, np.arange(6, dtype="i2").reshape(2, 3))
    g2 = Group()
    g2.variables["deep"] = Variable("double", ["/g1/y"], (3,), {}, np.array([0.5, 1.5, 2.5]))
    g1.groups["g2"] = g2
    g.groups["g1"] = g1
    return Dataset(g)


def unlimited_dim() -> Dataset:
    g = Group({"time": Dimension(4, True), "x": Dimension(2)})
    g.variables["v"] = Variable("float", ["/time", "/x"], (4, 2), {}, np.arange(8, dtype="f4").reshape(4, 2),
                                chunks=[1, 2])
    return Dataset(g)


def fill_partial() -> Dataset:
    g = _root(x=6)
    data = np.array([1, 2, -99, -99, -99, -99], dtype="i4")
    g.variables["v"] = Variable("int", ["/x"], (6,), {"_FillValue": Attribute("int", np.array([-99]))}, data,
                                chunks=[2])
    return Dataset(g)


def default_fill() -> Dataset:
    g = _root(x=4)
    g.variables["d"] = Variable("double", ["/x"], (4,), {}, np.array([1.0, 9.969209968386869e36, 9.969209968386869e36,
                                                                      9.969209968386869e36]), chunks=[1])
    return Dataset(g)


def big_endian() -> Dataset:
    g = _root(x=4)
    g.variables["f"] = Variable("float", ["/x"], (4,), {}, np.array([0.5, -1, 2, 3], ">f4"), endianness="big")
    return Dataset(g)


def shuffle_zlib() -> Dataset:
    g = _root(x=64)
    g.variables["i"] = Variable("int", ["/x"], (64,), {}, np.arange(64, dtype="i4") * 1000, chunks=[16],
                                filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}])
    return Dataset(g)


def _attrs(**attrs: Attribute) -> Callable[[], Dataset]:
    return lambda: Dataset(Group(attributes=dict(attrs)))


def typed_attrs() -> Dataset:
    return Dataset(Group(attributes={
        "s1": Attribute("short", np.array([-3])), "ub": Attribute("ubyte", np.array([255, 0])),
        "i64": Attribute("int64", np.array([-(2**63), 2**63 - 1])),
        "u64": Attribute("uint64", np.array([2**64 - 1], "u8")),
        "b": Attribute("byte", np.array([-128]))}))


def chunk_layout() -> Dataset:
    g = _root(x=5, y=4)
    g.variables["a"] = Variable("int", ["/x", "/y"], (5, 4), {}, np.arange(20, dtype="i4").reshape(5, 4), chunks=[2, 3])
    return Dataset(g)


CASES: list[Case] = [
    Case("numeric-types", "all ten numeric types with their extreme values", numeric_types, requires=_needs("int64")),
    Case("char-var", "a 2-D char variable with NUL padding", char_var, requires=_needs("char")),
    Case("string-var", "a string variable, empty and non-ASCII strings", string_var, requires=_needs("strings")),
    Case("long-string", "a string longer than the default _nczarr_maxstrlen (128)", long_string,
         requires=_needs("strings")),
    Case("scalar", "scalar double and int variables", scalar, requires=_needs("scalars")),
    Case("groups-nested", "nested groups using dimensions from their ancestors", groups_nested,
         requires=_needs("groups")),
    Case("unlimited-dim", "a variable along an unlimited dimension", unlimited_dim, requires=_needs("unlimited")),
    Case("fill-partial", "a chunked variable written in part, with _FillValue", fill_partial, requires=_needs("fill")),
    Case("default-fill", "unwritten chunks of a double without _FillValue (netCDF default fill)", default_fill,
         requires=_needs("fill")),
    Case("big-endian", "a big-endian float variable", big_endian, requires=_needs("endianness")),
    Case("shuffle-zlib", "an int variable with shuffle and zlib", shuffle_zlib, requires=_needs("filters")),
    Case("char-attr-json-number", 'char attribute "42" (App. D case 3)', _attrs(answer=Attribute("char", "42"))),
    Case("char-attr-json-object", "char attribute holding a JSON object (App. D case 3)",
         _attrs(meta=Attribute("char", '{"a": [1,2]}'))),
    Case("char-attr-text", "char attribute that is not JSON (App. D case 4)",
         _attrs(title=Attribute("char", "hello wörld [1, 2"))),
    Case("double-attr-precision", "double and float attributes needing every digit",
         _attrs(pi=Attribute("double", np.array([3.141592653589793, 1e-300])),
                f=Attribute("float", np.array([0.1, 1.0000001], "f4")))),
    Case("typed-attrs", "integer attributes of several types at their extremes", typed_attrs, requires=_needs("int64")),
    Case("string-attr", "a string attribute with two values",
         _attrs(sa=Attribute("string", np.array(["a", "bb"], dtype=object))), requires=_needs("strings")),
    Case("slash-separator", "chunk keys with the '/' dimension separator", chunk_layout, {"separator": "/"},
         requires=_needs("separator")),
    Case("f-order", "chunks stored in Fortran order", chunk_layout, {"order": "F"}, requires=_needs("order")),
]

BY_ID = {c.id: c for c in CASES}


# ---- reader-only cases: stores as netcdf-c wrote them, and an NCZarr v1 store synthesised from nczarr.md ----

def _from_cdl(name: str) -> Callable[[], Dataset]:
    def build() -> Dataset:
        from nczarr_conformance.cdl.parse import parse_cdl

        return parse_cdl((netcdf_c_corpus() / name).read_text(encoding="utf-8"))[1]
    return build


def v1_model() -> Dataset:
    g = Group({"x": Dimension(3), "y": Dimension(2)},
              attributes={"title": Attribute("char", "v1"), "n": Attribute("short", np.array([1, 2]))})
    g.variables["v"] = Variable("int", ["/x", "/y"], (3, 2), {}, np.array([[0, 1], [2, 3], [-1, -1]], "i4"))
    sub = Group()
    sub.variables["s"] = Variable("double", [], (), {}, np.array(6.5))
    g.groups["g"] = sub
    return Dataset(g)


#: no released netcdf-c writes the deprecated v1 format and netcdf-c's test corpus ships no v1 store, so the
#: matrix's v1 store is built from the text of nczarr.md Appendix C (peers/corpus.py write_v1_store)
V1_LABEL = ("NCZarr v1 objects (.nczarr/.nczgroup/.nczarray/.nczattr), synthesised from nczarr.md Appendix C: "
            "no released netcdf-c writes v1 and netcdf-c's corpus has no v1 store")

CASES += [
    Case("corpus-ref_byte", "netcdf-c corpus: pure Zarr, no _ARRAY_DIMENSIONS, no chunk (ref_byte.cdl)",
         _from_cdl("ref_byte.cdl")),
    Case("corpus-ref_byte_fill_value_null", "netcdf-c corpus: fill_value null (ref_byte_fill_value_null.cdl)",
         _from_cdl("ref_byte_fill_value_null.cdl"), requires=_needs("fill")),
    Case("corpus-ref_oldformat", "netcdf-c corpus: netcdf-c 4.9.3 keys in .zattrs (ref_oldformat.cdl)",
         _from_cdl("ref_oldformat.cdl"), requires=_needs("legacy")),
    Case("corpus-ref_oldkeys", "netcdf-c corpus: lower-case _nczarr_ keys in .zgroup/.zarray (ref_oldkeys.cdl)",
         _from_cdl("ref_oldkeys.cdl"), requires=_needs("legacy")),
    Case("nczarr-v1", V1_LABEL, v1_model, requires=_needs("legacy", "groups", "scalars")),
]
BY_ID = {c.id: c for c in CASES}
