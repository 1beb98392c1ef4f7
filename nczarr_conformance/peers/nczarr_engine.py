"""xarray with ``engine="nczarr"`` (our backend, access/xarray_backend.py) as users open a store."""
from __future__ import annotations

from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable, attribute_from_python
from nczarr_conformance.nczarr.dtypes import nctype_of_numpy
from nczarr_conformance.peers.capabilities import ALL
from nczarr_conformance.peers.common import PythonPackagePeer


class NczarrEngine(PythonPackagePeer):
    """Our xarray engine as a user opens it: ``xarray.open_datatree(url, engine="nczarr")`` without CF decoding,
    read back into the netCDF model as far as an xarray Dataset carries it.

    The engine is a reader of its own (access/xarray_backend.py: the encoding, the attributes as
    netCDF4-python returns them, the lazy arrays), so it has its own column: a failure that is the
    engine's alone (a v3 blosc codec it could not describe) cannot hide behind our reader's pass. What
    an xarray Dataset cannot carry is taken as xarray gives it: a dimension belongs to the outermost
    group whose variables use it (no variable: it is not seen), and a one-valued string attribute reads
    as char text, as netCDF4-python hands both to xarray's netcdf4 engine.
    """

    id, name, reads, capabilities, package = ("nczarr-engine", 'xarray engine="nczarr" (open_datatree)', True, ALL,
                                              "xarray")

    def read(self, url: str) -> Dataset:
        import xarray as xr

        tree = xr.open_datatree(url, engine="nczarr", decode_cf=False, mask_and_scale=False, decode_times=False)
        try:
            return Dataset(self._group(tree, "/", {}))
        finally:
            tree.close()

    def _group(self, node: Any, path: str, outer: dict[str, str]) -> Group:
        """The group at ``path``; ``outer``: dimension name → the path of the ancestor group defining it."""
        ds = node.to_dataset(inherit=False)
        unlimited = set(ds.encoding.get("unlimited_dims") or ())
        group = Group(attributes={n: attribute_from_python(v) for n, v in ds.attrs.items()})
        visible = dict(outer)
        for name, size in ds.sizes.items():
            if str(name) not in outer:
                group.dimensions[str(name)] = Dimension(int(size), str(name) in unlimited)
                visible[str(name)] = keys.join(path, str(name))
        for name, var in ds.variables.items():
            group.variables[str(name)] = self._variable(var, visible)
        for name, child in node.children.items():
            group.groups[str(name)] = self._group(child, keys.join(path, str(name)), visible)
        return group

    @staticmethod
    def _variable(var: Any, visible: dict[str, str]) -> Variable:
        values = np.asarray(var.values)
        if values.dtype.kind == "S" and values.dtype.itemsize == 1:
            nctype = "char"
        elif values.dtype.kind in ("O", "U"):
            nctype, values = "string", values.astype(object)
        else:
            nctype = nctype_of_numpy(values.dtype)
        attrs = {n: attribute_from_python(v) for n, v in var.attrs.items()}
        if nctype == "char" and "_FillValue" in attrs:  # the engine gives a char fill as bytes, as netcdf4's does
            fill = var.attrs["_FillValue"]
            attrs["_FillValue"] = Attribute("char", fill.decode("latin-1") if isinstance(fill, bytes) else str(fill))
        return Variable(nctype, [visible[str(d)] for d in var.dims], tuple(values.shape), attrs, values)
