"""Rules for netcdf-c's DRAFT NCZarr v3 layout (netcdf-c PR #3068, unmerged): where its code and its document differ.

The draft's ``libnczarr/zformat3.c`` (DennisHeimbigner/netcdf-c ``v3plug.dmh``, blob 718d69c) and its
``docs/nczarr.md`` appendix E spell several keys differently. A store using either spelling is read by
one and missed by the other, so each difference is a named finding (warnings: the layout is a draft).
These run on a Zarr v3 store whose root carries ``_nczarr_superblock``; every other v3 rule runs too.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.checker.v3 import nodes
from nczarr_conformance.zarr3.draft import ARRAY, ATTRS, GROUP, RAW_BITS, SUPERBLOCK, is_draft
from nczarr_conformance.zarr3.draft import DRAFT_FLAVOR as DRAFT_FLAVOR
from nczarr_conformance.zarr3.metadata import ZARR_JSON

SOURCE = "netcdf-c PR #3068 (draft, unmerged): libnczarr/zformat3.c vs docs/nczarr.md appendix E"
#: the rules nczarr-check adds to the v3 rules on a draft store
DRAFT_RULES = ("NCZ-V3-DRAFT-LAYOUT", "NCZ-V3-DRAFT-TYPE-KEY", "NCZ-V3-DRAFT-SUPERBLOCK", "NCZ-V3-DRAFT-DIMENSIONS",
               "NCZ-V3-DRAFT-SUBGROUPS", "NCZ-V3-DRAFT-ATTRIBUTE-TYPES", "NCZ-V3-DRAFT-FILL")


def draft_docs(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """node → zarr.json of a draft store; empty when the store is not one."""
    docs = {n: d for n, d in nodes(ctx).docs.items() if isinstance(d, dict)}
    root = docs.get("/")
    return docs if root is not None and is_draft(root) else {}


def _attrs(doc: dict[str, Any]) -> dict[str, Any]:
    attrs = doc.get("attributes")
    return attrs if isinstance(attrs, dict) else {}


def _key(node: str) -> str:
    return node.rstrip("/") + "/" + ZARR_JSON


@rule("NCZ-V3-DRAFT-LAYOUT", Severity.INFO, source=SOURCE)
def draft_layout(ctx: CheckContext) -> Iterator[Finding]:
    """The store is in netcdf-c's draft NCZarr v3 layout, which no released netcdf-c reads or writes."""
    if draft_docs(ctx):
        yield get("NCZ-V3-DRAFT-LAYOUT").finding("/zarr.json", f"flavor {DRAFT_FLAVOR}: netcdf-c PR #3068's draft "
                                                 "layout (unmerged); no released netcdf-c reads it")


@rule("NCZ-V3-DRAFT-TYPE-KEY", Severity.WARNING, source=SOURCE)
def draft_type_key(ctx: CheckContext) -> Iterator[Finding]:
    """An array's netCDF type alias: the code reads and writes _nczarr_array.nczarr_type, the document type_alias."""
    for node, doc in sorted(draft_docs(ctx).items()):
        info = _attrs(doc).get(ARRAY)
        if not isinstance(info, dict):
            continue
        for key, other, who in (("nczarr_type", "type_alias", "the document"), ("type_alias", "nczarr_type",
                                                                                  "zformat3.c")):
            if key in info:
                yield get("NCZ-V3-DRAFT-TYPE-KEY").finding(
                    _key(node), f"type alias under {key!r} ({info[key]!r}); {who} reads {other!r}")


@rule("NCZ-V3-DRAFT-SUPERBLOCK", Severity.WARNING, source=SOURCE)
def draft_superblock(ctx: CheckContext) -> Iterator[Finding]:
    """_nczarr_superblock: the document shows {version, format}; zformat3.c writes {version} and reads
    zarr_format/nczarr_format, which neither writes."""
    docs = draft_docs(ctx)
    if not docs:
        return
    block = _attrs(docs["/"]).get(SUPERBLOCK)
    found = sorted(block) if isinstance(block, dict) else block
    if not isinstance(block, dict) or set(block) != {"version", "format"}:
        yield get("NCZ-V3-DRAFT-SUPERBLOCK").finding(
            "/zarr.json", f"_nczarr_superblock keys {found!r}: the document has ['format', 'version']; "
            "zformat3.c writes ['version'] and reads 'zarr_format'/'nczarr_format'")


def _group_infos(ctx: CheckContext) -> Iterator[tuple[str, dict[str, Any]]]:
    for node, doc in sorted(draft_docs(ctx).items()):
        info = _attrs(doc).get(GROUP)
        if isinstance(info, dict):
            yield node, info


@rule("NCZ-V3-DRAFT-DIMENSIONS", Severity.WARNING, source=SOURCE)
def draft_dimensions(ctx: CheckContext) -> Iterator[Finding]:
    """_nczarr_group.dimensions: zformat3.c writes and reads {name: {size, unlimited}}, the document a list."""
    for node, info in _group_infos(ctx):
        dims = info.get("dimensions")
        if isinstance(dims, list):
            yield get("NCZ-V3-DRAFT-DIMENSIONS").finding(
                _key(node), "dimensions as the document's list of {name, size, unlimited}; zformat3.c "
                "(decode_dim_decls) needs an object {name: {size, unlimited}}")


@rule("NCZ-V3-DRAFT-SUBGROUPS", Severity.WARNING, source=SOURCE)
def draft_subgroups(ctx: CheckContext) -> Iterator[Finding]:
    """_nczarr_group's subgroup list: zformat3.c writes and reads 'groups', the document 'subgroups'."""
    for node, info in _group_infos(ctx):
        if "subgroups" in info:
            yield get("NCZ-V3-DRAFT-SUBGROUPS").finding(
                _key(node), "subgroups listed under the document's 'subgroups'; zformat3.c reads 'groups'")


@rule("NCZ-V3-DRAFT-ATTRIBUTE-TYPES", Severity.WARNING, source=SOURCE)
def draft_attribute_types(ctx: CheckContext) -> Iterator[Finding]:
    """_nczarr_attrs.attribute_types: zformat3.c writes {name: type}; the document a list of
    {name, configuration: {type}}."""
    for node, doc in sorted(draft_docs(ctx).items()):
        block = _attrs(doc).get(ATTRS)
        table = block.get("attribute_types") if isinstance(block, dict) else None
        if isinstance(table, list):
            yield get("NCZ-V3-DRAFT-ATTRIBUTE-TYPES").finding(
                _key(node), "attribute_types as the document's list of {name, configuration: {type}}; "
                "zformat3.c (computeattrinfo) looks each name up in an object")


@rule("NCZ-V3-DRAFT-FILL", Severity.WARNING, source=SOURCE + "; Zarr v3 core spec 3.1 \"fill_value\"")
def draft_fill(ctx: CheckContext) -> Iterator[Finding]:
    """fill_value as zformat3.c writes it but the v3 spec refuses: null (NOFILL), or a JSON string for a
    char (uint8) or string (r<bits>) array."""
    for node, doc in sorted(draft_docs(ctx).items()):
        if doc.get("node_type") != "array":
            continue
        fill, dtype = doc.get("fill_value"), doc.get("data_type")
        if fill is None:
            yield get("NCZ-V3-DRAFT-FILL").finding(
                _key(node), "fill_value null (netCDF NOFILL): the v3 spec requires a value; zarr-python refuses it")
        elif isinstance(fill, str) and (dtype == "uint8" or (isinstance(dtype, str) and RAW_BITS.match(dtype))):
            yield get("NCZ-V3-DRAFT-FILL").finding(
                _key(node), f"fill_value {fill!r} is a string for data_type {dtype}: the v3 spec wants "
                + ("an integer" if dtype == "uint8" else "a list of bytes"))
