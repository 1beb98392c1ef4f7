"""xarray's DataTree over the zarr engine: every group, not only the root."""
from __future__ import annotations

from typing import Any

from nczarr_conformance.model import Dataset, Group
from nczarr_conformance.peers.capabilities import PURE_ZARR
from nczarr_conformance.peers.common import PythonPackagePeer, untyped_attributes, variable_from_values, zarr_store
from nczarr_conformance.peers.zarr_python import ZARR_PYTHON_CHAR_FAULTS, ZarrPython


class XarrayDatatree(PythonPackagePeer):
    """``xarray.open_datatree(engine="zarr")``: every group, where ``open_zarr`` reads one."""

    id, name, reads, capabilities, package = "xarray-datatree", "xarray open_datatree", True, PURE_ZARR, "xarray"
    known = ZARR_PYTHON_CHAR_FAULTS  # it reads through zarr-python

    def read(self, url: str) -> Dataset:
        import warnings

        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no consolidated metadata": expected for most writers
            try:
                tree = xr.open_datatree(zarr_store(url), engine="zarr", consolidated=None, decode_cf=False,
                                        mask_and_scale=False, decode_times=False)
            except Exception as exc:  # name the first failing array in name order, as Xarray.read does
                try:
                    ZarrPython().read(url)
                except Exception as first:  # any failure: its text names the array
                    raise type(exc)(f"{first}") from exc
                raise
        return Dataset(self._group(tree))

    def _group(self, node: Any) -> Group:
        ds = node.to_dataset(inherit=False)  # a child shows its ancestors' coordinates too: not its own
        group = Group(attributes=untyped_attributes(dict(ds.attrs)))
        for name, var in {**ds.coords, **ds.data_vars}.items():
            group.variables[str(name)] = variable_from_values(var.values, untyped_attributes(dict(var.attrs)))
        for name, child in node.children.items():
            group.groups[str(name)] = self._group(child)
        return group
