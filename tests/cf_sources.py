"""What the reference tests share (tests/test_references*.py, tests/stores/test_icechunk.py): the small CF-like
netCDF-4 file they make references of, written by netCDF4-python (packed shorts with a _FillValue in shuffle +
deflate chunks (3, 2, 6), a contiguous float coordinate and a time axis; each test adds what it is about), and
the check of kerchunk references against h5py's chunk index of the file they point into."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def write_cf(path: Path, *, record: bool = True, title: str | None = None, station: bool = False,
             obs_group: bool = False) -> Path:
    """``record``: time unlimited with a noleap calendar and an add_offset on tas (else 8 fixed steps, no
    calendar, no offset); ``station``: a char variable (lat, nchar=5); ``obs_group``: /obs/pr (time, lon)
    float32 in zlib chunks (4, 3)."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as ds:
        if title is not None:
            ds.title = title
        if record:
            ds.Conventions = "CF-1.8"
        ds.createDimension("time", None if record else 8)
        ds.createDimension("lat", 4)
        ds.createDimension("lon", 6)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2001-01-01"
        if record:
            t.calendar = "noleap"
        t[:] = np.arange(8) * 30.0
        lat = ds.createVariable("lat", "f4", ("lat",), contiguous=True)
        lat.units = "degrees_north"
        lat[:] = np.linspace(-45, 45, 4)
        tas: Any = ds.createVariable("tas", "i2", ("time", "lat", "lon"), zlib=True, shuffle=True, complevel=4,
                                     chunksizes=(3, 2, 6), fill_value=-999)
        if record:
            tas.scale_factor, tas.add_offset, tas.units = 0.01, 273.15, "K"
        else:
            tas.scale_factor, tas.units = 0.01, "K"
        raw = (np.arange(8 * 4 * 6).reshape(8, 4, 6) % 2000).astype("i2")
        tas.set_auto_maskandscale(False)
        tas[:] = np.where(raw % 7 == 0, -999, raw)
        if station:
            ds.createDimension("nchar", 5)
            name = ds.createVariable("station", "S1", ("lat", "nchar"))
            name[:] = netCDF4.stringtochar(np.array(["ab", "cde", "", "fghij"], dtype="S5"))
        if obs_group:
            pr = ds.createGroup("obs").createVariable("pr", "f4", ("time", "lon"), zlib=True, chunksizes=(4, 3))
            pr.long_name = "precipitation"
            pr[:] = np.arange(48, dtype="f4").reshape(8, 6) / 7
    return path


def chunks_match_hdf5(refs: dict[str, Any], source: Path, url: str) -> int:
    """Assert each ``[url, offset, length]`` of ``refs`` (kerchunk's, one file) is h5py's chunk of ``source`` at that
    grid place (a contiguous dataset: its one extent, one chunk of its shape), with the codecs of its HDF5 filters
    and its dtype; the number of references checked."""
    import h5py

    seen = 0
    with h5py.File(source, "r") as f:
        for key, ref in refs.items():
            if not isinstance(ref, list):
                continue
            array, _, index = key.rpartition("/")
            dataset, zarray = f[array], json.loads(refs[f"{array}/.zarray"])
            assert ref[0] == url, key
            if dataset.chunks is None:  # contiguous: its one extent
                assert zarray["chunks"] == list(dataset.shape or (1,)), key
                assert (ref[1], ref[2]) == (dataset.id.get_offset(), dataset.id.get_storage_size()), key
            else:
                assert zarray["chunks"] == list(dataset.chunks), key
                offset = tuple(int(i) * c for i, c in zip(index.split("."), dataset.chunks, strict=True))
                info = dataset.id.get_chunk_info_by_coord(offset)
                assert (ref[1], ref[2]) == (info.byte_offset, info.size), key
            plist = dataset.id.get_create_plist()
            hdf5 = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
            codecs = [c["id"] for c in zarray["filters"] or []] + ([zarray["compressor"]["id"]]
                                                                   if zarray["compressor"] else [])
            assert codecs == [{1: "zlib", 2: "shuffle"}[fid] for fid in hdf5], key
            if dataset.dtype.kind in "iuf":
                assert np.dtype(zarray["dtype"]) == dataset.dtype, key
            seen += 1
    return seen
