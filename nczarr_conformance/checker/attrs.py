"""Rules about attributes and their NCZarr types (nczarr.md Appendix D)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.errors import NczarrError
from nczarr_conformance.model import is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import parse_attr_type
from nczarr_conformance.zarr3.metadata import FLAVOR as V3_FLAVOR
from nczarr_conformance.zarr3.metadata import ZARR_JSON


def _attribute_sets(ctx: CheckContext) -> Iterator[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    for gkey, rec in sorted(ctx.groups.items()):
        yield gkey, rec.zattrs, ctx.attr_types_of(gkey)
    for akey, arec in sorted(ctx.arrays.items()):
        yield akey, arec.zattrs, arec.attr_types


@rule("NCZ-ATTR-TYPE", Severity.ERROR, source="nczarr.md App. D")
def attr_type(ctx: CheckContext) -> Iterator[Finding]:
    """Each _nczarr_attr type is a known dtype and the attribute's JSON value converts to it."""
    if not ctx.nczarr:
        return
    for node, zattrs, types in _attribute_sets(ctx):
        for name, type_text in (types or {}).items():
            if name not in zattrs or type_text == "|J0":
                continue
            where = keys.join(node, ".zattrs")
            try:
                parse_attr_type(type_text)
                attr_codec.decode(zattrs[name], type_text)
            except NczarrError as exc:
                yield get("NCZ-ATTR-TYPE").finding(where, f"attribute {name!r} typed {type_text!r}: {exc}")


@rule("NCZ-ATTR-UNTYPED", Severity.WARNING, source="nczarr.md App. D read cases")
def attr_untyped(ctx: CheckContext) -> Iterator[Finding]:
    """Every user attribute of an NCZarr dataset has a type in _nczarr_attr; else readers infer one."""
    if not ctx.nczarr:
        return
    for node, zattrs, types in _attribute_sets(ctx):
        missing = [n for n in zattrs if not is_internal_attribute(n) and n not in (types or {})
                   and not n.startswith(QUANTIZE_PREFIX)]
        if missing:
            yield get("NCZ-ATTR-UNTYPED").finding(keys.join(node, ".zattrs"),
                                                  f"no _nczarr_attr type for {', '.join(map(repr, missing))}; "
                                                  "readers infer one")


QUANTIZE_PREFIX = "_Quantize"


@rule("NCZ-ATTR-QUANTIZE", Severity.INFO, source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def attr_quantize(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c writes the _Quantize* attributes of a quantized variable untyped; it reads them back as int,
    so they are not flagged NCZ-ATTR-UNTYPED."""
    if not ctx.nczarr:
        return
    for node, zattrs, types in _attribute_sets(ctx):
        untyped = [n for n in zattrs if n.startswith(QUANTIZE_PREFIX) and n not in (types or {})]
        if untyped:
            yield get("NCZ-ATTR-QUANTIZE").finding(keys.join(node, ".zattrs"),
                                                   f"{', '.join(map(repr, untyped))} untyped, as netcdf-c writes "
                                                   "them: readers infer an integer")


@rule("NCZ-ATTR-GHOST", Severity.WARNING, source="nczarr.md App. D")
def attr_ghost(ctx: CheckContext) -> Iterator[Finding]:
    """_nczarr_attr types name only attributes that exist."""
    if not ctx.nczarr:
        return
    for node, zattrs, types in _attribute_sets(ctx):
        ghosts = [n for n in (types or {}) if n not in zattrs]
        if ghosts:
            yield get("NCZ-ATTR-GHOST").finding(keys.join(node, ".zattrs"),
                                                f"types given for absent attributes {', '.join(map(repr, ghosts))}")


@rule("NCZ-ATTR-NAME-EMPTY", Severity.ERROR,
      source="netCDF names (netcdf-c NC_check_name: NC_EBADNAME); netcdf-c 4.9.0 ncdump: Attribute not found")
def attr_name_empty(ctx: CheckContext) -> Iterator[Finding]:
    """No attribute is named "": netCDF has no empty name, CDL cannot spell one, ncdump and our reader refuse it.

    In a Zarr v3 store, the ``attributes`` of each ``zarr.json`` (the v3 rules' documents)."""
    for node, zattrs, _ in _attribute_sets(ctx):
        if "" in zattrs:
            yield get("NCZ-ATTR-NAME-EMPTY").finding(keys.join(node, ".zattrs"), attr_codec.EMPTY_NAME)
    if ctx.flavor == V3_FLAVOR:
        from nczarr_conformance.checker.v3 import nodes

        for node, doc in sorted(nodes(ctx).docs.items()):
            attributes = doc.get("attributes") if isinstance(doc, dict) else None
            if isinstance(attributes, dict) and "" in attributes:
                yield get("NCZ-ATTR-NAME-EMPTY").finding(keys.join(node, ZARR_JSON), attr_codec.EMPTY_NAME)
