"""Canonical model → an NZ-1.0 dataset: the pure Zarr v3 layout (zarr3/writer.py) plus NZ's requirements.

What NZ-1.0 (zarr3/nz.py names the source) adds to what :class:`V3Writer` writes, and why:

* the root declares ``conventions`` with ``NZ-1.0`` first ("ordered from most general to most
  specific"); a netCDF ``Conventions`` (``CF-1.8``) joins it (``"NZ-1.0 CF-1.8"``), as the README's
  ``"NZ-1.0 CF-1.12"`` example and its NUG mapping (``Conventions`` → ``conventions``) say, and is not
  written twice; our NZ reader shows it as ``Conventions`` again. NZ's schema.json asks for
  ``conventions`` on every group and a ``zarr_conventions`` registration in every node's attributes,
  so every group and array gets them (their validator refuses a node without);
* ``dimension_names`` on every array, ``[]`` on a scalar (the schema requires the member);
* ``_FillValue`` as a JSON value of the array's ``data_type`` (``-9999.0``, ``"NaN"``), not xarray's
  base64 spelling of a float: "The type of _FillValue is the array's data_type". xarray 2026.9
  refuses that spelling of a float ``_FillValue`` unless opened with ``use_zarr_fill_value_as_mask=True``
  (docs/writer.md); the storage ``fill_value`` holds that value too, so values mask alike;
* an attribute whose netCDF type NZ's default JSON typing would not give back (a ``short``, a ``float``,
  an ``int`` read as ``int64``) is named in ``_nczarr_attr`` ``types`` with its v3 data type name, the
  annotation NZ's schema defines, so it reads back in its type; netCDF ``string`` attributes (JSON
  strings read back as ``char``) are said in the notes line;
* consolidated metadata as the v3 writer writes it (NZ "RECOMMENDS" it, zarr-python's form).

What NZ-1.0 cannot hold is said by the v3 writer's notes line (unlimited dimensions; dimensions from an
ancestor group, which NZ scopes to the group: "Dimension labels are scoped to the group"), plus one
line for data types outside NZ's core set. Refused (one line, nothing written): a group in which two
arrays would give one dimension label two lengths (an ancestor's ``x`` and the group's own ``x``):
that store breaks NZ's shared dimension constraint and no reader can place both; char arrays
(``null_terminated_bytes`` is a data_type object, which NZ's schema.json refuses though its README
admits extension types; no named v3 type is char) and float attributes mixing numbers with NaN or
infinities (JSON spells those as strings; NZ wants attribute arrays of one JSON type): NZ's own
validator or nczarr-check would fail the store (issue 34).
"""
from __future__ import annotations

import json
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import Attribute, is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.zarr3 import nz
from nczarr_conformance.zarr3.v3_writer import DATA_TYPES, V3Plan, V3Writer, fill_json


class NzWriter(V3Writer):
    """:class:`V3Writer` writing NZ-1.0 (flavor ``nz``)."""

    def validate(self) -> None:
        super().validate()
        for gkey, group in self.ds.root.walk():
            lengths: dict[str, tuple[int, str]] = {}
            for vname, var in group.variables.items():
                for dim, size in zip(var.dimensions, var.shape, strict=True):
                    label = keys.basename(dim)
                    first = lengths.setdefault(label, (size, keys.join(gkey, vname)))
                    if first[0] != size:
                        raise UnsupportedError(
                            f"{keys.join(gkey, vname)}: dimension label {label!r} is {size} long here and "
                            f"{first[0]} in {first[1]}; NZ-1.0's shared dimension constraint needs one length "
                            "per label within a group")
        outside = [keys.join(g, v) for g, group in self.ds.root.walk() for v, var in group.variables.items()
                   if DATA_TYPES.get(var.type) not in nz.CORE_TYPES]
        if outside:
            self.notes.append(f"NZ-1.0 data types outside its core set (string, char: extension types NZ readers "
                              f"need not decode): {', '.join(outside)}")
        chars = [f"{keys.join(g, v)} (char: Zarr v3 has no named data type for it, and NZ-1.0's schema.json "
                 "allows data_type names only)" for g, group in self.ds.root.walk()
                 for v, var in group.variables.items() if var.type == "char"]
        mixed = [f"{keys.join(g, name) if name else g}:{n} (a float attribute holding NaN or ±Infinity among "
                 "numbers: JSON spells those as strings, and NZ-1.0 wants an attribute array of one JSON type)"
                 for g, group in self.ds.root.walk()
                 for name, attributes in [("", group.attributes),
                                          *((v, var.attributes) for v, var in group.variables.items())]
                 for n, a in attributes.items() if n != "_FillValue" and _mixes_numbers_and_names(a)]
        if chars or mixed:
            # refused before anything is written: the store would fail NZ's own validator (NCZ-NZ-SCHEMA) or
            # nczarr-check (NCZ-NZ-ATTRIBUTE-VALUES); pure Zarr v3 (--flavor zarr) holds both
            raise UnsupportedError(f"NZ-1.0 cannot hold {'; '.join(chars + mixed)}; --flavor zarr writes them "
                                   "as pure Zarr v3")


    @staticmethod
    def _lossy_attributes(where: str, attributes: dict[str, Attribute]) -> list[str]:
        """Only netCDF string attributes: every numeric type is kept by ``_nczarr_attr`` ``types``."""
        return [f"{where}:{n} ({a.type})" for n, a in attributes.items()
                if a.type == "string" and not is_internal_attribute(n) and n != "_FillValue"]

    def _put_node(self, node: str, doc: dict[str, Any], *, record: bool = True) -> None:
        """NZ's attributes put into a node's document, in place (a sub-group's consolidated entry shares
        its ``attributes`` object), before the v3 writer serializes it."""
        attributes = doc.setdefault("attributes", {})
        source = self.plans[node].var.attributes if doc.get("node_type") == "array" else self._group(node).attributes
        types = {n: DATA_TYPES[a.type] for n, a in source.items()
                 if n in attributes and n != "_FillValue" and a.type in DATA_TYPES
                 and nz.default_type(attributes[n]) != a.type}
        if doc.get("node_type") == "array":
            plan = self.plans[node]
            assert isinstance(plan, V3Plan)
            if plan.fill_attribute is not None:
                attributes["_FillValue"] = _fill_value(plan.var.type, plan.fill_attribute)
            doc.setdefault("dimension_names", [])
        else:
            _declare(attributes)
        if types:
            attributes[nz.TYPES_ATTR] = {"types": types}
        attributes["zarr_conventions"] = [dict(nz.REGISTRATION)]
        super()._put_node(node, doc, record=record)

    def _group(self, gkey: str) -> Any:
        for key, group in self.ds.root.walk():
            if key == gkey:
                return group
        raise KeyError(gkey)


def _mixes_numbers_and_names(attr: Attribute) -> bool:
    """A float attribute of several values, some NaN or infinite (JSON spells those as strings) and some not."""
    import numpy as np

    if attr.type not in ("float", "double"):
        return False
    values = np.asarray(attr.value).ravel()
    finite = np.isfinite(values)
    return bool(values.size > 1 and finite.any() and not finite.all())


def _declare(attributes: dict[str, Any]) -> None:
    """``conventions`` holding NZ-1.0 first, a ``Conventions`` (CF…) merged into it, in its place."""
    name = "conventions" if isinstance(attributes.get("conventions"), str) else \
        "Conventions" if isinstance(attributes.get("Conventions"), str) else None
    rest = [t for t in nz.tokens(attributes.get(name) if name else "") if t.lower() != nz.NAME.lower()]
    declared = " ".join([nz.NAME, *rest])
    if name is None:
        attributes["conventions"] = declared
        return
    items = [("conventions", declared) if key == name else (key, value) for key, value in attributes.items()]
    attributes.clear()
    attributes.update(items)


def _fill_value(nctype: str, attr: Attribute) -> Any:
    """``_FillValue`` as a JSON value of the array's data type (the v3 ``fill_value`` spellings)."""
    if nctype in ("char", "string"):
        value, _ = attr_codec.encode(attr, json_convention=False)
        return value
    import numpy as np

    return json.loads(json.dumps(fill_json(nctype, np.asarray(attr.value).ravel()[0])))


__all__ = ["NzWriter"]
