"""Spec rules (nczarr.md Appendices D and E, xarray's convention, Zarr scalars and fills) × implementations.

Each rule is evaluated from what an implementation really wrote in the matrix
run (the raw objects of its store) or from what it really read back from
stores built for the rule; the evidence names the case and what was seen.
Whether a rule applies to an implementation follows from its capabilities
(peers/capabilities.py: ``nczarr``, ``appendix-d``, ``netcdf-fill``) and not
from its id, so a reader added from outside is graded like a built-in one.
"""
from __future__ import annotations

import fnmatch
import importlib.util
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.conformance import rules_v3
from nczarr_conformance.conformance.matrix import MatrixRun
from nczarr_conformance.conformance.rule_context import RuleContext
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers.base import PEERS, Peer
from nczarr_conformance.stores import DirectoryStore


def _speaks_nczarr(peer: Peer) -> bool:
    """Typed attributes and named dimensions are part of what it writes or returns."""
    return "nczarr" in peer.capabilities


def _pre_appendix_d(peer: Peer) -> bool:
    """An NCZarr writer of the 4.8-4.9.0 layout, which predates Appendices D and E (2022-08)."""
    return _speaks_nczarr(peer) and "appendix-d" not in peer.capabilities


@dataclass(frozen=True)
class SpecRule:
    id: str
    source: str
    statement: str
    evaluate: Callable[[RuleContext, Peer], tuple[str, str]]


@dataclass
class Result:
    rule: str
    implementation: str
    status: str  # follows | deviates | not-applicable | skipped
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "implementation": self.implementation, "status": self.status,
                "evidence": self.evidence}


def _writer_scope(peer: Peer, *, nczarr_only: bool = True) -> tuple[str, str] | None:
    if not peer.writes:
        return "not-applicable", "does not write"
    if nczarr_only and not _speaks_nczarr(peer):
        return "not-applicable", "writes pure Zarr: no NCZarr attribute types"
    return None


def _types(ctx: RuleContext, case: str, writer: str) -> dict[str, Any]:
    zattrs = ctx.raw(case, writer, "/.zattrs") or {}
    for key in ("_nczarr_attr", "_NCZARR_ATTR"):
        if isinstance(zattrs.get(key), dict):
            return zattrs[key].get("types", {}) or {}
    return {}


Evaluate = Callable[["RuleContext", Peer], tuple[str, str]]


def _d_write(case: str, check: Callable[[dict[str, Any], dict[str, Any]], str | None]) -> Evaluate:
    def evaluate(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
        scope = _writer_scope(peer)
        if scope:
            return scope
        if _pre_appendix_d(peer):
            return "not-applicable", "writes the 4.8–4.9.0 layout, which predates Appendix D (2022-08)"
        zattrs = ctx.raw(case, peer.id, "/.zattrs")
        if zattrs is None:
            return "skipped", f"case {case}: nothing written"
        problem = check(zattrs, _types(ctx, case, peer.id))
        seen = {k: v for k, v in zattrs.items() if not k.startswith("_")}
        if problem:
            return "deviates", f"case {case}: {problem}"
        return "follows", f"case {case}: wrote {json.dumps(seen)}"
    return evaluate


def _check_write1(z: dict[str, Any], t: dict[str, Any]) -> str | None:
    if z.get("s1") != -3 or z.get("b") != -128:
        return f"single values written as {z.get('s1')!r}, {z.get('b')!r}; JSON scalars -3, -128 expected"
    if t.get("s1") not in ("<i2", ">i2", "|i2") or t.get("b") not in ("<i1", "|i1", ">i1"):
        return f"types recorded as {t.get('s1')!r}, {t.get('b')!r}"
    return None


def _check_write2(z: dict[str, Any], t: dict[str, Any]) -> str | None:
    pi, f = z.get("pi"), z.get("f")
    if pi != [3.141592653589793, 1e-300]:
        return f"double attribute [3.141592653589793, 1e-300] written as {pi!r}"
    expected = [float(np.float32(0.1)), float(np.float32(1.0000001))]
    if not isinstance(f, list) or [float(np.float32(v)) for v in f] != expected:
        return f"float attribute [0.1, 1.0000001] written as {f!r}"
    return None


def _check_write3(z: dict[str, Any], t: dict[str, Any]) -> str | None:
    return None if z.get("meta") == {"a": [1, 2]} else f"char '{{\"a\": [1,2]}}' written as {z.get('meta')!r}"


def _check_write3_number(z: dict[str, Any], t: dict[str, Any]) -> str | None:
    return None if z.get("answer") == 42 and not isinstance(z.get("answer"), bool) else \
        f"char \"42\" written as {z.get('answer')!r}"


def _check_write4(z: dict[str, Any], t: dict[str, Any]) -> str | None:
    return None if z.get("title") == "hello wörld [1, 2" else f"char text written as {z.get('title')!r}"


def _d_write3(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    status, evidence = _d_write("char-attr-json-object", _check_write3)(ctx, peer)
    if status != "follows":
        return status, evidence
    status2, evidence2 = _d_write("char-attr-json-number", _check_write3_number)(ctx, peer)
    return status2, f"{evidence}; {evidence2}"


# ---- reading rules: one store per rule, holding raw JSON attributes ---------------------------------

READ_CASES: dict[str, list[tuple[str, Any, str | None, str, Any]]] = {
    # rule: [(attribute, JSON value, dtype or None, expected netCDF type, expected value)]
    # a char attribute's expected value is compared as the JSON its text parses to
    "D.read.1": [("probe", 5, "<i2", "short", [5]),
                 # Appendix D writing case 3 stores char "42" as the JSON number 42 typed >S1; reading it back is
                 # case 1 with a char dtype: the text "42" (netcdf-c 4.10.1 returns "4", its first character)
                 ("probe_char", 42, ">S1", "char", 42)],
    "D.read.2": [("probe", [1, 2.5], "<f8", "double", [1.0, 2.5])],
    "D.read.3": [("probe", [[1, 2], [3]], ">S1", "char", [[1, 2], [3]])],
    "D.read.4": [("probe", {"k": [1, {"z": None}]}, ">S1", "char", {"k": [1, {"z": None}]})],
}


def _read_store(ctx: RuleContext, rule_id: str) -> Path:
    def make(path: Path) -> None:
        with DirectoryStore(path, "w") as store:
            write_dataset(Dataset(Group({"x": Dimension(1)})), store, consolidate=False)  # .zattrs edited below
        zattrs = json.loads((path / ".zattrs").read_text())
        for name, value, dtype, _, _ in READ_CASES[rule_id]:
            zattrs[name] = value
            zattrs["_nczarr_attr"]["types"][name] = dtype
        (path / ".zattrs").write_text(json.dumps(zattrs))

    return ctx.built(rule_id, make)


def _read_probe(attr: Attribute | None, value: Any, dtype: str | None, nctype: str,
                expected: Any) -> tuple[bool, str]:
    if attr is None:
        return False, f"{json.dumps(value)} typed {dtype}: attribute not seen"
    got = attr.value if attr.type == "char" else attr.value.tolist()
    if attr.type == "char":
        try:
            ok = json.loads(got) == expected
        except ValueError:
            ok = False
    else:
        ok = got == expected
    return ok and attr.type == nctype, f"{json.dumps(value)} typed {dtype} read as {attr.type} {json.dumps(got)}"


def _d_read(rule_id: str) -> Evaluate:
    def evaluate(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
        if not peer.reads or not _speaks_nczarr(peer):
            return "not-applicable", "not a netCDF reader: attribute types are not part of what it returns"
        if peer.available():
            return "skipped", peer.available() or ""
        probes = READ_CASES[rule_id]
        try:
            attrs = peer.read(str(_read_store(ctx, rule_id))).root.attributes
        except Exception as exc:  # a reader failing on the rule's store is the finding
            what = "; ".join(f"{json.dumps(v)} typed {d}" for _, v, d, _, _ in probes)
            return "deviates", f"{what}: reading failed: {type(exc).__name__}: {exc}"
        seen = [_read_probe(attrs.get(name), value, dtype, nctype, expected)
                for name, value, dtype, nctype, expected in probes]
        return ("follows" if all(ok for ok, _ in seen) else "deviates"), "; ".join(e for _, e in seen)
    return evaluate


# ---- Appendix E, xarray, scalars, fills ------------------------------------------------------------

def _zarray(ctx: RuleContext, case: str, writer: str, name: str) -> dict[str, Any] | None:
    doc = ctx.raw(case, writer, f"/{name}/.zarray")
    return doc if isinstance(doc, dict) else None


def _e_scope(peer: Peer) -> tuple[str, str] | None:
    scope = _writer_scope(peer)
    if scope:
        return scope
    if _pre_appendix_d(peer):
        return "not-applicable", "writes the 4.8–4.9.0 layout, which predates Appendix E (2022-08-29)"
    return None


def _e_char(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    scope = _e_scope(peer)
    if scope:
        return scope
    z = _zarray(ctx, "char-var", peer.id, "c")
    if z is None:
        return "skipped", "case char-var: nothing written"
    return ("follows" if z.get("dtype") == ">S1" else "deviates"), f"case char-var: char written as {z.get('dtype')}"


def _e_string(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    scope = _e_scope(peer)
    if scope:
        return scope
    z = _zarray(ctx, "string-var", peer.id, "s")
    if z is None:
        return "skipped", "case string-var: nothing written (the writer failed or cannot express strings)"
    dtype = str(z.get("dtype"))
    ok = dtype.startswith("|S") and dtype[2:].isdigit()
    return ("follows" if ok else "deviates"), f"case string-var: string written as {dtype}"


def _e_maxstrlen(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    scope = _e_scope(peer)
    if scope:
        return scope
    z = _zarray(ctx, "long-string", peer.id, "s")
    zattrs = ctx.raw("long-string", peer.id, "/s/.zattrs") or {}
    if z is None:
        return "skipped", "case long-string: nothing written"
    n = int(str(z.get("dtype"))[2:]) if str(z.get("dtype")).startswith("|S") else -1
    declared = zattrs.get("_nczarr_maxstrlen", (ctx.raw("long-string", peer.id, "/.zattrs") or {}).get(
        "_nczarr_default_maxstrlen", 128))
    path = ctx.store("long-string", peer.id)
    kept = None
    if path is not None:
        from nczarr_conformance.access.dataset import open_dataset

        kept = np.asarray(open_dataset(str(path)).root.variables["s"].data).tolist()
    expected = ["a" * 200, "b"]
    truncated = [s.encode()[:n].decode("utf-8", "ignore") for s in expected]
    ok = n == declared and kept == truncated
    detail = "kept whole" if kept == expected else f"truncated to {len(kept[0]) if kept else '?'} bytes"
    return ("follows" if ok else "deviates"), (f"case long-string: dtype |S{n}, maxstrlen {declared}, the 200-byte "
                                               f"string {detail}")


def _x_dims(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    if not peer.writes:
        return "not-applicable", "does not write"
    if not _speaks_nczarr(peer):
        return "not-applicable", "a pure Zarr writer: xarray's own convention puts _ARRAY_DIMENSIONS on every array"
    top = ctx.raw("groups-nested", peer.id, "/top/.zattrs")
    sub = ctx.raw("groups-nested", peer.id, "/g1/w/.zattrs")
    if top is None:
        return "skipped", "case groups-nested: nothing written"
    ok = top.get("_ARRAY_DIMENSIONS") == ["x"] and "_ARRAY_DIMENSIONS" not in (sub or {})
    return ("follows" if ok else "deviates"), (f"case groups-nested: /top has {top.get('_ARRAY_DIMENSIONS')}, "
                                               f"/g1/w has {(sub or {}).get('_ARRAY_DIMENSIONS')}")


def _z_scalar(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    scope = _writer_scope(peer)
    if scope:
        return scope
    z = _zarray(ctx, "scalar", peer.id, "d")
    if z is None:
        return "skipped", "case scalar: nothing written (the writer refuses or fails on scalars)"
    return ("follows" if z.get("shape") == [1] else "deviates"), f"case scalar: shape {z.get('shape')}"


def _z_fill(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    if not peer.writes:
        return "not-applicable", "does not write"
    if "netcdf-fill" not in peer.capabilities:
        return "not-applicable", "a pure Zarr writer: no netCDF default fill to encode"
    z = _zarray(ctx, "default-fill", peer.id, "d")
    z2 = _zarray(ctx, "fill-partial", peer.id, "v")
    if z is None or z2 is None:
        return "skipped", "cases default-fill/fill-partial: nothing written"
    fill = z.get("fill_value")
    exact = isinstance(fill, float) and fill == 9.969209968386869e36
    ok = exact and z2.get("fill_value") == -99
    return ("follows" if ok else "deviates"), (f"case default-fill: fill_value {fill!r} for NC_FILL_DOUBLE "
                                               f"9.969209968386869e+36; case fill-partial: {z2.get('fill_value')!r}")


def _z_infer(ctx: RuleContext, peer: Peer) -> tuple[str, str]:
    if not peer.reads or not _speaks_nczarr(peer):
        return "not-applicable", "not a netCDF reader"
    if peer.available():
        return "skipped", peer.available() or ""
    if importlib.util.find_spec("zarr") is None:  # the input is written by zarr-python, the producer of such stores
        return "skipped", "zarr-python, which writes this rule's input, is not installed"

    def make(path: Path) -> None:
        import zarr

        g = zarr.open_group(str(path), mode="w", zarr_format=2)
        g.create_array("a", shape=(5, 4), dtype="<i4", fill_value=0)[...] = 1
        g.create_array("b", shape=(4,), dtype="<i4", fill_value=0)[...] = 2

    try:
        model = peer.read(str(ctx.built("Z.infer", make)))
        a, b = model.root.variables["a"], model.root.variables["b"]
    except Exception as exc:  # a reader failing on the rule's store is the finding
        return "deviates", f"pure-Zarr a(5,4), b(4): reading failed: {type(exc).__name__}: {exc}"
    ok = a.dimensions[1] == b.dimensions[0] and a.dimensions[0] != a.dimensions[1]
    return (("follows" if ok else "deviates"),
            f"pure-Zarr a(5,4), b(4) read with dimensions {a.dimensions}, {b.dimensions}")


SPEC_RULES: list[SpecRule] = [
    SpecRule("D.write.1", "nczarr.md Appendix D, writing case 1",
             "a non-char attribute with one value is written as the equivalent JSON atomic value, its dtype recorded",
             _d_write("typed-attrs", _check_write1)),
    SpecRule("D.write.2", "nczarr.md Appendix D, writing case 2",
             "a non-char attribute with several values is written as a JSON array of equivalent values",
             _d_write("double-attr-precision", _check_write2)),
    SpecRule("D.write.3", "nczarr.md Appendix D, writing case 3",
             "a char attribute whose text parses as JSON is written as that JSON expression", _d_write3),
    SpecRule("D.write.4", "nczarr.md Appendix D, writing case 4",
             "a char attribute whose text is not JSON is written as a JSON string",
             _d_write("char-attr-text", _check_write4)),
    SpecRule("D.read.1", "nczarr.md Appendix D, reading case 1",
             "a JSON atomic value with a dtype is read as a one-element attribute of that type", _d_read("D.read.1")),
    SpecRule("D.read.2", "nczarr.md Appendix D, reading case 2",
             "a JSON array of atomic values with a dtype is read as a vector of that type", _d_read("D.read.2")),
    SpecRule("D.read.3", "nczarr.md Appendix D, reading case 3",
             "a JSON array holding arrays or objects is read as char: its JSON text", _d_read("D.read.3")),
    SpecRule("D.read.4", "nczarr.md Appendix D, reading case 4",
             "a JSON object is read as char: its JSON text", _d_read("D.read.4")),
    SpecRule("E.char", "nczarr.md Appendix E", "a char variable is written with dtype >S1", _e_char),
    SpecRule("E.string", "nczarr.md Appendix E", "a string variable is written with dtype |Sn", _e_string),
    SpecRule("E.maxstrlen", "nczarr.md Appendix E",
             "the |Sn length is _nczarr_maxstrlen, else _nczarr_default_maxstrlen, else 128, and longer strings are "
             "truncated to it", _e_maxstrlen),
    SpecRule("X.dims", 'nczarr.md "XArray"',
             "_ARRAY_DIMENSIONS is written for root-group variables whose dimensions are all in the root group, "
             "and only for them", _x_dims),
    SpecRule("Z.scalar", "nczarr.md \"The NCZarr Data Model\"",
             "a netCDF scalar is stored as a Zarr array of shape [1]", _z_scalar),
    SpecRule("Z.fill", "Zarr v2 spec \"fill_value\"", "fill_value encodes the variable's fill exactly "
             "(the _FillValue, else the netCDF default fill)", _z_fill),
    SpecRule("Z.infer", "nczarr.md \"Translation\"", "a pure-Zarr array without _ARRAY_DIMENSIONS gets one shared "
             "dimension per distinct length", _z_infer),
    SpecRule("V3.codecs", "Zarr v3 core spec \"Codecs\"", "codecs are array→array codecs, then exactly one "
             "array→bytes codec, then bytes→bytes codecs (inside a shard and its index too)", rules_v3.v3_codecs),
    SpecRule("V3.endian", "Zarr v3 bytes codec, \"endian\"", "the bytes codec names its endian for every data type "
             "of more than one byte", rules_v3.v3_endian),
    SpecRule("V3.keys", "Zarr v3 core spec \"chunk_key_encoding\"", "every chunk object is named as the array's "
             "chunk_key_encoding names chunks", rules_v3.v3_keys),
    SpecRule("V3.dims", "Zarr v3 core spec \"dimension_names\"; xarray's v3 layout",
             "each array names its netCDF dimensions in dimension_names, not in _ARRAY_DIMENSIONS", rules_v3.v3_dims),
    SpecRule("V3.shard", "Zarr v3 sharding_indexed codec", "an array in sharding_indexed shards (zarr-python 3's) "
             "reads as its values", rules_v3.v3_shard_read),
    SpecRule("V3.missing", "Zarr v3 core spec \"fill_value\"", "a chunk that is not stored reads as fill_value",
             rules_v3.v3_missing_read),
]


#: Where our writer departs from the spec on purpose: (rule, implementation) → why, with the evidence.
#: A listed result still reads "deviates" (the contract's statuses), its evidence opening with the reason;
#: the gate (cli/report.py) accepts it, and a listed one that no longer deviates is an error, so the list
#: cannot go stale.
DOCUMENTED_DEVIATIONS: dict[tuple[str, str], str] = {
    ("X.dims", "ours"): (
        "by choice, as netcdf-c 4.10.1 writes: _ARRAY_DIMENSIONS on the variables of every group (noxarray turns "
        "it off), so xarray's open_datatree and open_zarr(group=...) open every group "
        "(tests/nczarr/test_writer.py::test_array_dimensions_in_every_group_as_netcdf_c_writes_them)"),
    ("X.dims", "ours-nczarr-2"): (
        "by choice: _ARRAY_DIMENSIONS on the variables of every group, where netcdf-c 4.9.2 writes it in the root "
        "only: xarray finds NCZarr's dimrefs only under netcdf-c 4.9.0's upper-case _NCZARR_ARRAY, so without it "
        "xarray's open_datatree cannot open a sub-group of the 4.9.1–4.9.2 layout "
        "(tests/nczarr/test_flavor_nczarr_2.py::test_what_we_write_beyond_4_9_2_is_what_a_reader_needs)"),
    ("E.maxstrlen", "ours"): (
        "by choice: strings as |Sn, n the longest value (lossless), without _nczarr_maxstrlen, as netcdf-c 4.10.1 "
        "writes its own: it reads the length from the dtype where that attribute is absent and shows the attribute "
        "as a user attribute where present (issue 34; tests/nczarr/test_reserved_attrs.py)"),
    ("E.maxstrlen", "ours-nczarr-2"): (
        "by choice, as for ours: |Sn with n the longest value, no _nczarr_maxstrlen (netcdf-c's zsync.c takes the "
        "dtype's length; 4.10.1 shows the attribute as a user attribute)"),
    ("D.write.3", "ours-nczarr-2"): (
        "by choice, as for ours: char text is written as a JSON string by default; Appendix D case 3 is "
        "`nc2nczarr --json-attributes=spec`"),
    ("D.write.3", "ours"): (
        "by choice: the default writes char text as a JSON string (lossless for every reader); Appendix D "
        "case 3 is `nc2nczarr --json-attributes=spec`. netcdf-c 4.10.1 reads case-3 numbers and booleans back "
        "as one character (_Unsigned=\"true\" -> \"1\": ubyte data read as signed; "
        "test_known_deviation_netcdf_c_reads_json_atomic_char_as_one_character, tests/test_attr_lossless.py)"),
    # nc2nczarr --reference writes the metadata nc2nczarr writes (nczarr/writer.py, the plan a copy makes: its
    # store equals the copy but for where the chunks are), so ours' choices hold there, for the same reasons
    ("X.dims", "ours-references"): (
        "by choice, as for ours (the same writer): _ARRAY_DIMENSIONS on the variables of every group, which xarray's "
        "open_datatree and open_zarr(group=...) over the references need (docs/references.md)"),
    ("E.maxstrlen", "ours-references"): (
        "by choice, as for ours (the same writer): |Sn with n the longest value, lossless, no _nczarr_maxstrlen"),
    ("D.write.3", "ours-references"): (
        "by choice, as for ours (the same writer): char text as a JSON string; Appendix D case 3 is "
        "`nc2nczarr --reference --json-attributes=spec`"),
    ("E.char", "ours-references"): (
        "by choice: char as |S1 (`--char-as S1`, the --reference default), because the readers of references besides "
        "ours, xarray and zarr-python 3, refuse >S1 (netcdf-c reads no references); marked char by "
        "_nczarr_array.nczarr_type, so our reader reads it as char (docs/references.md; "
        "tests/test_references.py::test_by_default_char_is_S1_for_xarray_marked_char_and_read_back_as_netcdf4_reads_it)"),
}


def select_rules(patterns: list[str] | None) -> list[SpecRule]:
    """The spec rules whose id matches one of the glob ``patterns`` (all of them without any); a pattern
    matching none is refused (ValueError naming the known ids): a typo is told, not run as an empty grading."""
    if not patterns:
        return list(SPEC_RULES)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(r.id, pattern) for r in SPEC_RULES):
            raise ValueError(f"--rules {pattern!r} matches no spec rule; known: {', '.join(r.id for r in SPEC_RULES)}")
    return [r for r in SPEC_RULES if any(fnmatch.fnmatchcase(r.id, p) for p in patterns)]


def evaluate_rules(run: MatrixRun, rules: list[SpecRule] | None = None, *, jobs: int = 1) -> list[Result]:
    """Every rule (``rules``: those only) × every implementation of the run, in that order; ``jobs`` > 1
    evaluates them on that many threads (a rule mostly waits on a peer's read), with the same results."""
    ctx = RuleContext(run)
    pairs = [(rule, PEERS[info["id"]]) for rule in (SPEC_RULES if rules is None else rules)
             for info in run.implementations]
    if jobs <= 1:
        return [_evaluate(ctx, rule, peer) for rule, peer in pairs]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ncz-rule") as pool:
        return list(pool.map(lambda pair: _evaluate(ctx, *pair), pairs))


def _evaluate(ctx: RuleContext, rule: SpecRule, peer: Peer) -> Result:
    """One rule × one implementation."""
    missing = peer.available()
    if missing:
        return Result(rule.id, peer.id, "skipped", missing)
    try:
        status, evidence = rule.evaluate(ctx, peer)
    except Exception as exc:  # a rule that cannot evaluate is reported, not raised
        status, evidence = "deviates", f"evaluation failed: {type(exc).__name__}: {exc}"
    why = DOCUMENTED_DEVIATIONS.get((rule.id, peer.id))
    if why is not None and status == "deviates":
        evidence = f"documented deviation, {why}. Seen: {evidence}"
    return Result(rule.id, peer.id, status, evidence.replace(str(ctx.run.workdir), "<work>"))
