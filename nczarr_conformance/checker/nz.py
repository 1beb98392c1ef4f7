"""NZ-1.0 check rules (issue #25 (c)): a Zarr v3 store whose root claims NZ-1.0 is held to its requirements.

Each rule stands on one item of the NZ-1.0 README's "Normative Summary" (zarr-conventions/nz at
b4c2c21612aec67a2211cc6a5fd1ba1f98c09d6e, Apache License 2.0; zarr3/nz.py) or on its schema.json, which
every ``zarr.json`` is validated against as their validate.js validates it (JSON Schema 2020-12; the
verdicts are compared with theirs in tests/zarr3/test_nz.py). The rules run on a store whose root
``zarr.json`` declares NZ-1.0 in ``conventions`` or registers it in ``zarr_conventions``; item 1 (a valid
Zarr v3 dataset) is the NCZ-V3-* rules' work.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker import v3
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.zarr3 import nz
from nczarr_conformance.zarr3.metadata import FLAVOR

SPEC = "NZ-1.0 (zarr-conventions/nz b4c2c21)"
#: the flavor nczarr-check reports for a store claiming NZ-1.0 (its rules still run as for Zarr v3)
REPORT_FLAVOR = nz.FLAVOR
#: the rules an NZ-1.0 store is checked by, after the Zarr v3 ones (checker/__init__.py runs both)
NZ_RULES = ("NCZ-NZ-CONVENTIONS", "NCZ-NZ-SCHEMA", "NCZ-NZ-DIMENSION-NAMES", "NCZ-NZ-SHARED-DIMENSIONS",
            "NCZ-NZ-FILLVALUE", "NCZ-NZ-RESERVED", "NCZ-NZ-NAMES", "NCZ-NZ-ATTRIBUTE-VALUES", "NCZ-NZ-DATA-TYPES",
            "NCZ-NZ-CONSOLIDATED")
#: attribute names NZ itself gives a leading underscore (its reserved _FillValue, its schema's _nczarr_attr)
NZ_OWN_NAMES = frozenset({"_FillValue", nz.TYPES_ATTR})
STYLE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
INT_RANGES = {f"{s}int{b}": ((0, 2**b - 1) if s else (-(2 ** (b - 1)), 2 ** (b - 1) - 1))
              for s in ("", "u") for b in (8, 16, 32, 64)}
FLOAT_WORDS = frozenset({"NaN", "Infinity", "-Infinity"})


def applies(ctx: CheckContext) -> bool:
    """Whether the store is Zarr v3 and its root claims NZ-1.0 (zarr3/nz.py :func:`~nz.claims`)."""
    return ctx.flavor == FLAVOR and nz.claims(v3.nodes(ctx).docs.get("/"))


def _docs(ctx: CheckContext) -> list[tuple[str, dict[str, Any]]]:
    return [(node, doc) for node, doc in sorted(v3.nodes(ctx).docs.items()) if isinstance(doc, dict)]


def _attrs(doc: dict[str, Any]) -> dict[str, Any]:
    raw = doc.get("attributes")
    return raw if isinstance(raw, dict) else {}


def _key(node: str) -> str:
    return keys.join(node, "zarr.json")


# ---- Normative Summary 2 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-CONVENTIONS", Severity.ERROR, source=f'{SPEC} "Convention Declaration"; Normative Summary 2')
def nz_conventions(ctx: CheckContext) -> Iterator[Finding]:
    """The root group's conventions attribute is a string holding NZ-1.0 (a zarr_conventions entry alone is not it)."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-CONVENTIONS").finding
    attributes = _attrs(v3.nodes(ctx).docs.get("/") or {})
    value = attributes.get("conventions")
    if any(t.lower() == nz.NAME.lower() for t in nz.tokens(value)):
        return
    if "conventions" in attributes and not isinstance(value, str):
        yield finding("/zarr.json", f"conventions is {type(value).__name__}; NZ-1.0 makes it a string of "
                      "space-separated convention identifiers")
    elif nz.declared(attributes):
        yield finding("/zarr.json", "NZ-1.0 is declared in Conventions (capital C), which readers treat as "
                      "equivalent; NZ's root attribute, and its schema.json, is conventions", Severity.WARNING)
    else:
        yield finding("/zarr.json", "zarr_conventions registers NZ-1.0 but the root attribute conventions does not "
                      "hold \"NZ-1.0\": that declaration is what makes a dataset NZ")


# ---- schema.json ----------------------------------------------------------------------------------------------
@rule("NCZ-NZ-SCHEMA", Severity.ERROR, source=f"{SPEC} schema.json (JSON Schema 2020-12, as their validate.js)")
def nz_schema(ctx: CheckContext) -> Iterator[Finding]:
    """Every zarr.json validates against NZ-1.0's schema.json (zarr_conventions entry, conventions, dimension_names)."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-SCHEMA").finding
    for node, doc in _docs(ctx):
        errors = nz.schema_errors(doc)
        if errors:
            shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
            yield finding(_key(node), f"invalid against NZ-1.0's schema.json: {shown}")


# ---- Normative Summary 3 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-DIMENSION-NAMES", Severity.ERROR, source=f'{SPEC} "Array"; Normative Summary 3')
def nz_dimension_names(ctx: CheckContext) -> Iterator[Finding]:
    """Every array has dimension_names, as long as shape, with no null or empty-string entry."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-DIMENSION-NAMES").finding
    for node, doc in _docs(ctx):
        if doc.get("node_type") != "array":
            continue
        names, shape = doc.get("dimension_names"), doc.get("shape")
        if not isinstance(names, list):
            yield finding(_key(node), "no dimension_names: NZ-1.0 requires them on every array")
        elif isinstance(shape, list) and len(names) != len(shape):
            yield finding(_key(node), f"dimension_names has {len(names)} entries, shape {len(shape)}")
        else:
            bad = [i for i, n in enumerate(names) if not isinstance(n, str) or n == ""]
            if bad:
                yield finding(_key(node), f"dimension_names entries {bad} are null, empty or not strings")


# ---- Normative Summary 4 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-SHARED-DIMENSIONS", Severity.ERROR, source=f'{SPEC} "Dimension"; Normative Summary 4')
def nz_shared_dimensions(ctx: CheckContext) -> Iterator[Finding]:
    """Within a group, arrays sharing a dimension label have one length along that axis."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-SHARED-DIMENSIONS").finding
    seen: dict[tuple[str, str], tuple[int, str]] = {}
    for node, doc in _docs(ctx):
        names, shape = doc.get("dimension_names"), doc.get("shape")
        if doc.get("node_type") != "array" or not isinstance(names, list) or not isinstance(shape, list):
            continue
        for label, size in zip(names, shape, strict=False):
            if not isinstance(label, str) or not label:
                continue
            first = seen.setdefault((keys.parent(node), label), (size, node))
            if first[0] != size:
                yield finding(_key(node), f"dimension {label!r} is {size} long here and {first[0]} in "
                              f"{first[1]}, in the same group")


# ---- Normative Summary 5 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-FILLVALUE", Severity.ERROR, source=f'{SPEC} "The _FillValue Attribute"; Normative Summary 5')
def nz_fillvalue(ctx: CheckContext) -> Iterator[Finding]:
    """An array's _FillValue, when present, is a JSON value of the array's data_type ("NaN" etc. for floats)."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-FILLVALUE").finding
    for node, doc in _docs(ctx):
        attributes = _attrs(doc)
        if doc.get("node_type") != "array" or "_FillValue" not in attributes:
            continue
        problem = _fill_problem(attributes["_FillValue"], doc.get("data_type"))
        if problem:
            yield finding(_key(node), f"_FillValue {problem}; its type is the array's data_type")


def _fill_problem(value: Any, data_type: Any) -> str | None:
    """Why ``value`` is not a JSON value of ``data_type`` (core types; an extension type is not judged)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if data_type in INT_RANGES:
        low, high = INT_RANGES[data_type]
        if not number or (isinstance(value, float) and not value.is_integer()):
            return f"{value!r} is not an integer"
        return None if low <= value <= high else f"{value!r} is outside {data_type}"
    if data_type in ("float32", "float64"):
        if isinstance(value, str) and value not in FLOAT_WORDS:
            return (f"{value!r} is a string, not a number or NaN/Infinity/-Infinity (xarray writes a float "
                    "_FillValue as base64 of its bytes)")
        if not number and not isinstance(value, str):
            return f"{value!r} is not a number"
        if number and data_type == "float32" and math.isfinite(value) and abs(value) > 3.4028234663852886e38:
            return f"{value!r} is outside float32"
        return None
    if data_type == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not true or false"
    if data_type in ("complex64", "complex128"):
        ok = isinstance(value, list) and len(value) == 2 and all(
            (isinstance(v, int | float) and not isinstance(v, bool)) or v in FLOAT_WORDS for v in value)
        return None if ok else f"{value!r} is not a [real, imaginary] pair"
    return None


# ---- Normative Summary 6 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-RESERVED", Severity.ERROR, source=f'{SPEC} "Properties"; Normative Summary 6')
def nz_reserved(ctx: CheckContext) -> Iterator[Finding]:
    """Reserved names only as NZ defines them: conventions a string on groups, _FillValue on arrays only."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-RESERVED").finding
    for node, doc in _docs(ctx):
        attributes = _attrs(doc)
        kind = doc.get("node_type")
        if kind == "group" and "_FillValue" in attributes:
            yield finding(_key(node), "_FillValue on a group: NZ reserves it as an array attribute")
        if kind == "array" and "conventions" in attributes:
            yield finding(_key(node), "conventions on an array: NZ reserves it as a root group attribute")
        elif "conventions" in attributes and not isinstance(attributes["conventions"], str):
            yield finding(_key(node), "conventions is not a string of convention identifiers")


# ---- Normative Summary 7 --------------------------------------------------------------------------------------
@rule("NCZ-NZ-NAMES", Severity.ERROR, source=f'{SPEC} "Naming Rules"; Normative Summary 7')
def nz_names(ctx: CheckContext) -> Iterator[Finding]:
    """Array, group, attribute names: no '/' (error); a letter first, then letters, digits, '_'; no case twins."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-NAMES").finding
    docs = _docs(ctx)
    for node, doc in docs:
        for name in _attrs(doc):
            if "/" in name or name == "":
                yield finding(_key(node), f"attribute name {name!r} is empty or holds the path separator '/'")
            elif name not in NZ_OWN_NAMES and name != "zarr_conventions" and not STYLE.match(name):
                yield finding(_key(node), f"attribute name {name!r} should begin with a letter and hold only "
                              "letters, digits and '_'", Severity.WARNING)
        yield from (finding(_key(node), m, Severity.WARNING) for m in _case_twins(list(_attrs(doc)), "attribute"))
        name = keys.basename(node)
        if node != "/" and not STYLE.match(name):
            yield finding(_key(node), f"{doc.get('node_type')} name {name!r} should begin with a letter and hold "
                          "only letters, digits and '_'", Severity.WARNING)
    children: dict[str, list[str]] = {}
    for node, _ in docs:
        if node != "/":
            children.setdefault(keys.parent(node), []).append(keys.basename(node))
    for parent, names in sorted(children.items()):
        yield from (finding(_key(parent), m, Severity.WARNING) for m in _case_twins(names, "member"))


def _case_twins(names: list[str], what: str) -> Iterator[str]:
    by_fold: dict[str, list[str]] = {}
    for name in names:
        by_fold.setdefault(name.casefold(), []).append(name)
    for twins in by_fold.values():
        if len(twins) > 1:
            yield f"{what} names {', '.join(map(repr, sorted(twins)))} differ only by case, which NZ says to avoid"


# ---- Attribute Value Types ------------------------------------------------------------------------------------
@rule("NCZ-NZ-ATTRIBUTE-VALUES", Severity.ERROR, source=f'{SPEC} "Attribute Value Types"')
def nz_attribute_values(ctx: CheckContext) -> Iterator[Finding]:
    """A JSON array used as an attribute value is homogeneous: numbers, strings or booleans, not a mix."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-ATTRIBUTE-VALUES").finding
    for node, doc in _docs(ctx):
        for name, value in _attrs(doc).items():
            if name == "zarr_conventions" or not isinstance(value, list):
                continue
            kinds = sorted({_kind(v) for v in value})
            if len(kinds) > 1:
                yield finding(_key(node), f"attribute {name!r} mixes {' and '.join(kinds)} in one array")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "booleans"
    if isinstance(value, int | float):
        return "numbers"
    if isinstance(value, str):
        return "strings"
    return "objects" if isinstance(value, dict) else "arrays" if isinstance(value, list) else "nulls"


# ---- Required Data Types ----------------------------------------------------------------------------------------
@rule("NCZ-NZ-DATA-TYPES", Severity.WARNING, source=f'{SPEC} "Required Data Types"')
def nz_data_types(ctx: CheckContext) -> Iterator[Finding]:
    """An array's data_type outside NZ-1.0's core types is an extension NZ readers need not decode."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-DATA-TYPES").finding
    for node, doc in _docs(ctx):
        data_type = doc.get("data_type")
        if doc.get("node_type") == "array" and data_type not in nz.CORE_TYPES:
            name = data_type.get("name") if isinstance(data_type, dict) else data_type
            yield finding(_key(node), f"data_type {name!r} is outside NZ-1.0's core types: an extension type "
                          "NZ readers are not required to decode")


# ---- Consolidated Metadata --------------------------------------------------------------------------------------
@rule("NCZ-NZ-CONSOLIDATED", Severity.ERROR, source=f'{SPEC} "Consolidated Metadata"')
def nz_consolidated(ctx: CheckContext) -> Iterator[Finding]:
    """Consolidated metadata, when present, is consistent with every zarr.json it summarizes (NZ's MUST)."""
    if not applies(ctx):
        return
    finding = get("NCZ-NZ-CONSOLIDATED").finding
    for found in v3.v3_consolidated(ctx):
        yield finding(found.key, f"NZ-1.0 requires consolidated metadata consistent with the zarr.json objects: "
                      f"{found.message}")
