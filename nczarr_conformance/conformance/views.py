"""What a comparison looks at: the whole netCDF model, or only arrays and untyped attributes.

A pure-Zarr writer or reader cannot express netCDF types of attributes, named or
unlimited dimensions, so a cell involving one compares the ``zarr`` view: each
array's values (flattened: a netCDF scalar is a 1-element Zarr array) and each
attribute's value without its type.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from nczarr_conformance.model import (
    Attribute,
    Dataset,
    is_internal_attribute,
    values_to_json,
)


def netcdf_view(dataset: Dataset) -> Any:
    """The netCDF model without storage: each writer in the matrix chooses its own chunks and
    codecs (ncgen, xarray, zarr-python have no way to be told ours), so a cell grades what a
    reader sees, not how it was stored; storage is held to account by the tests (model.diff)."""
    return json.loads(dataset.canonical_text(storage=False))


def _loose(attr: Attribute) -> Any:
    """An attribute's value without its type: JSON arrays and objects held as char text count as JSON."""
    if attr.type == "char":
        try:
            parsed = json.loads(attr.value)
        except ValueError:
            return attr.value
        return parsed if isinstance(parsed, (list, dict)) else attr.value
    values = values_to_json(attr.value, attr.type)
    return values


def zarr_view(dataset: Dataset, *, root_only: bool = False, attributes: bool = True) -> Any:
    arrays: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for gkey, group in dataset.root.walk():
        if root_only and gkey != "/":
            continue
        attrs[gkey] = {n: _loose(a) for n, a in group.attributes.items()
                            if not is_internal_attribute(n) and n != "_FillValue" and not n.startswith("__")}
        for vname, var in group.variables.items():
            path = f"{gkey.rstrip('/')}/{vname}"
            flat = np.asarray(var.data).reshape(-1)
            arrays[path] = values_to_json(flat, var.type)
            attrs[path] = {n: _loose(a) for n, a in var.attributes.items()
                                if not is_internal_attribute(n) and n != "_FillValue"}
    if not attributes:
        return {"arrays": arrays}
    return {"arrays": arrays, "attributes": {k: v for k, v in attrs.items() if v}}


def view(dataset: Dataset, kind: str, *, root_only: bool = False, attributes: bool = True) -> Any:
    return netcdf_view(dataset) if kind == "netcdf" else zarr_view(dataset, root_only=root_only, attributes=attributes)
