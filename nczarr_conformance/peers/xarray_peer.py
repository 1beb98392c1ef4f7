"""xarray with its own zarr engine (Zarr v2 and v3); named ``xarray_peer`` so that no module here is
called as a library it imports."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance.model import Dataset, Group
from nczarr_conformance.peers.base import CannotExpress, reject_options
from nczarr_conformance.peers.capabilities import PURE_ZARR, PURE_ZARR_V3
from nczarr_conformance.peers.common import (
    PythonPackagePeer,
    fixed_width_bytes,
    plain,
    untyped_attributes,
    variable_from_values,
    writes_v3,
    zarr_store,
)
from nczarr_conformance.peers.zarr_python import ZARR_PYTHON_CHAR_FAULTS, ZarrPython


class Xarray(PythonPackagePeer):
    id, name, reads, writes, root_only, package = "xarray", "xarray", True, True, True, "xarray"
    known = ZARR_PYTHON_CHAR_FAULTS  # it reads through zarr-python
    # references: the zarr engine over fsspec's reference filesystem; icechunk: open_zarr(session.store)
    capabilities = PURE_ZARR | {"references", "icechunk"}

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        import xarray as xr

        reject_options(options, self.id)
        if dataset.root.groups:
            raise CannotExpress("xarray.Dataset.to_zarr writes one group")
        data_vars, encoding = {}, {}
        for name, var in dataset.root.variables.items():
            values = np.asarray(var.data)
            enc: dict[str, Any] = {"chunks": tuple(var.chunks) if var.chunks else None}
            if var.type == "string" and not writes_v3(self):  # v3: text as it is, written as v3's "string"
                values = fixed_width_bytes(values)
            attrs = {n: plain(a) for n, a in var.attributes.items() if n != "_FillValue"}
            if var.fill_value is not None and var.type not in ("char", "string"):
                enc["_FillValue"] = var.fill_value
            data_vars[name] = xr.Variable([d.rsplit("/", 1)[-1] for d in var.dimensions], values, attrs)
            encoding[name] = {k: v for k, v in enc.items() if v is not None}
        ds = xr.Dataset(data_vars, attrs={n: plain(a) for n, a in dataset.root.attributes.items()})
        ds.to_zarr(str(target), zarr_format=3 if writes_v3(self) else 2, consolidated=True, encoding=encoding)
        return str(target)

    def read(self, url: str) -> Dataset:
        import warnings

        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no consolidated metadata": expected for most writers
            try:
                # chunks=None: xarray's own lazy arrays, not dask's; the same zarr-python reads, without a
                # dask graph and scheduler run per variable (a third of this peer's time in a report)
                ds = xr.open_zarr(zarr_store(url), consolidated=None, chunks=None, decode_cf=False,
                                  mask_and_scale=False, decode_times=False)
            except Exception as exc:
                # xarray opens arrays concurrently and reports whichever failed first; name the
                # first failing array in name order instead, so the report is reproducible
                try:
                    ZarrPython().read(url)
                except Exception as first:  # any failure: its text names the array
                    raise type(exc)(f"{first}") from exc
                raise
        group = Group(attributes=untyped_attributes(dict(ds.attrs)))
        for name, var in {**ds.coords, **ds.data_vars}.items():
            group.variables[str(name)] = variable_from_values(var.values, untyped_attributes(dict(var.attrs)))
        return Dataset(group)


class XarrayV3(Xarray):
    """``xarray.Dataset.to_zarr(zarr_format=3)``: the v3 layout xarray writes by default (one group,
    ``dimension_names``, consolidated metadata in the root ``zarr.json``)."""

    id, name, reads, capabilities = "xarray-v3", "xarray (to_zarr zarr_format=3)", False, PURE_ZARR_V3
    known = ()  # a writer only

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr-python's warnings on what xarray asks of v3: tests/peers
            return super().write(dataset, target, options)
