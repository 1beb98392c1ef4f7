"""NZ-1.0 (zarr-conventions/nz, issue #25 (c)): what a Zarr v3 store declaring it means beyond pure v3.

Source: the NZ-1.0 proposal, https://github.com/zarr-conventions/nz at
b4c2c21612aec67a2211cc6a5fd1ba1f98c09d6e (README.md, schema.json; Apache License 2.0, the schema and its
licence are vendored as ``nczarr_conformance/schema/nz-1.0.schema.json`` and ``nz-1.0.LICENSE``).

Decisions, each from the README:

* a store is NZ when its root ``zarr.json``'s ``conventions`` attribute holds ``NZ-1.0`` ("Convention
  Declaration": case-insensitive; ``Conventions`` is read as equivalent); a ``zarr_conventions`` entry with
  NZ's uuid is the framework's optional registration ("MAY additionally"), so it alone also makes the
  store one that claims NZ: the checker then reports the missing declaration;
* reading: NZ's bookkeeping is not user data: the NZ entry of ``zarr_conventions`` is hidden, and the
  ``NZ-1.0`` token is taken out of ``conventions``; what remains (``CF-1.12``) is shown as the NUG's
  ``Conventions`` (the name netCDF tools look for) unless the node has a ``Conventions`` of its own;
* attributes are typed by NZ's "Attribute Value Types" table where it differs from our pure-Zarr default:
  a JSON integer is ``int64`` (ours picks ``int`` when it fits); ``_nczarr_attr`` ``types`` (in NZ's
  schema: "attribute type annotations using Zarr v3 data type names") names an attribute's numeric type;
  strings stay netCDF ``char`` text and booleans, objects and mixed arrays keep the pure-Zarr reading;
* ``_FillValue`` is typed by the array's ``data_type`` ("The type of _FillValue is the array's
  data_type"): a JSON number, or ``"NaN"``/``"Infinity"``/``"-Infinity"`` as v3 spells those in
  ``fill_value``.
"""
from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from nczarr_conformance.model import Attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import attr_type_string
from nczarr_conformance.zarr3.metadata import NUMERIC_TYPES

#: the flavor name every command shows for an NZ-1.0 store (``nczarr-dump -k``, nczarr-check's report)
FLAVOR = "nz"
NAME = "NZ-1.0"
UUID = "d0a980b5-c644-4dcc-85a1-283799a58f40"
#: the ``zarr_conventions`` entry, as the README's "Convention Registration" gives it
REGISTRATION: dict[str, str] = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/nz/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/nz/blob/v1/README.md",
    "uuid": UUID,
    "name": NAME,
    "description": "Structural interoperability layer for scientific array conventions on Zarr v3",
}
#: the data types NZ implementations must support ("Required Data Types"); others are extensions
CORE_TYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32",
              "float64", "complex64", "complex128")
TYPES_ATTR = "_nczarr_attr"
SOURCE_COMMIT = "b4c2c21612aec67a2211cc6a5fd1ba1f98c09d6e"
_SPLIT = re.compile(r"[\s,]+")


def tokens(value: Any) -> list[str]:
    """The convention identifiers of a ``conventions`` value (space-separated; commas tolerated, as CF's)."""
    return [t for t in _SPLIT.split(value) if t] if isinstance(value, str) else []


def declared(attributes: Any) -> bool:
    """Whether a root group's attributes declare NZ-1.0 in ``conventions`` (or ``Conventions``, read as equivalent)."""
    if not isinstance(attributes, dict):
        return False
    return any(t.lower() == NAME.lower() for key in ("conventions", "Conventions")
               for t in tokens(attributes.get(key)))


def is_registration(entry: Any) -> bool:
    """Whether a ``zarr_conventions`` entry names NZ-1.0 (by uuid, or by name when it has no uuid)."""
    if not isinstance(entry, dict):
        return False
    return entry.get("uuid") == UUID or ("uuid" not in entry and entry.get("name") == NAME)


def registered(attributes: Any) -> bool:
    """Whether the attributes register NZ-1.0 in ``zarr_conventions``."""
    entries = attributes.get("zarr_conventions") if isinstance(attributes, dict) else None
    return isinstance(entries, list) and any(is_registration(e) for e in entries)


def claims(root: Any) -> bool:
    """Whether a root ``zarr.json`` document claims NZ-1.0 (declared or registered)."""
    attributes = root.get("attributes") if isinstance(root, dict) else None
    return declared(attributes) or registered(attributes)


def user_attributes(raw: dict[str, Any]) -> dict[str, Any]:
    """A node's raw attributes without NZ's bookkeeping (see the module docstring), in their order."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name == "zarr_conventions" and isinstance(value, list):
            rest = [e for e in value if not is_registration(e)]
            if rest:
                out[name] = rest
        elif name == "conventions" and isinstance(value, str) and any(t.lower() == NAME.lower()
                                                                      for t in tokens(value)):
            rest_text = " ".join(t for t in tokens(value) if t.lower() != NAME.lower())
            if rest_text:
                out["conventions" if "Conventions" in raw else "Conventions"] = rest_text
        else:
            out[name] = value
    return out


def attribute_types(raw: dict[str, Any]) -> dict[str, str]:
    """``_nczarr_attr`` ``types``: attribute name → netCDF type (numeric v3 names only; others ignored)."""
    block = raw.get(TYPES_ATTR)
    types = block.get("types") if isinstance(block, dict) else None
    if not isinstance(types, dict):
        return {}
    return {n: NUMERIC_TYPES[t] for n, t in types.items() if isinstance(t, str) and t in NUMERIC_TYPES}


def decode_attribute(value: Any, nctype: str | None) -> Attribute:
    """One attribute as NZ types it: ``nctype`` when annotated, a JSON integer (or list of them) as int64."""
    if nctype is not None:
        return attr_codec.decode(value, attr_type_string(nctype))
    if _integers(value):
        return attr_codec.decode(value, attr_type_string("int64"))
    return attr_codec.decode(value, None)


def _integers(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(v, int) and not isinstance(v, bool) for v in items) and \
        all(-2**63 <= v < 2**63 for v in items)


def default_type(value: Any) -> str:
    """The netCDF type NZ reading gives a JSON attribute value with no annotation."""
    return decode_attribute(value, None).type


@functools.cache
def schema() -> dict[str, Any]:
    """NZ-1.0's schema.json (vendored unchanged from the source commit)."""
    text = resources.files("nczarr_conformance").joinpath("schema/nz-1.0.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def schema_errors(doc: Any) -> list[str]:
    """What NZ-1.0's schema.json says is wrong with one ``zarr.json`` document (JSON Schema 2020-12, as
    their validate.js checks it with ajv): one line per error, ``path: message``; empty when valid."""
    import jsonschema  # imported when a store is checked against NZ, not when the package loads

    validator = jsonschema.Draft202012Validator(schema())
    out = []
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        where = "/".join(str(p) for p in error.absolute_path) or "(document)"
        out.append(f"{where}: {error.message}")
    return out


__all__ = ["CORE_TYPES", "FLAVOR", "NAME", "REGISTRATION", "UUID", "attribute_types", "claims", "declared",
           "decode_attribute", "default_type", "registered", "schema", "schema_errors", "tokens",
           "user_attributes"]
