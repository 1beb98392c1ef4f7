"""Make the benchmark's reference file: precip(time=256 unlimited, lat=480, lon=1440) float32,
chunks 8x480x1440, zlib level 1 (~400 MB), plus a 1-D time coordinate; and the same with a
fixed time dimension (nccopy 4.9.0 fails on unlimited ones); and the many-small-chunks layout of
model output (CMIP-style, one time step per chunk): 20 variables (time=365, lat=128, lon=128)
float32, chunks 1x128x128 (64 KiB), zlib level 1 + shuffle, 7300 chunks.

    python benchmarks/make_reference.py [--out benchmarks/data] [--ntime 256]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def make(path: Path, *, ntime: int, unlimited: bool) -> None:
    import netCDF4

    nc = netCDF4.Dataset(str(path), "w", format="NETCDF4")
    try:
        nc.createDimension("time", None if unlimited else ntime)
        nc.createDimension("lat", 480)
        nc.createDimension("lon", 1440)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "hours since 2000-03-01 12:00:00"
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat[:] = np.linspace(-59.875, 59.875, 480, dtype="f4")
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon[:] = np.linspace(-179.875, 179.875, 1440, dtype="f4")
        p = nc.createVariable("precip", "f4", ("time", "lat", "lon"), zlib=True, complevel=1,
                              chunksizes=(8, 480, 1440), fill_value=-9999.0)
        p.units = "mm/h"
        rng = np.random.default_rng(42)
        yy, xx = np.meshgrid(np.linspace(0, 6, 480), np.linspace(0, 24, 1440), indexing="ij")
        base = (np.sin(yy) * np.cos(xx) + 1).astype("f4")
        for start in range(0, ntime, 8):
            n = min(8, ntime - start)
            block = np.empty((n, 480, 1440), dtype="f4")
            for k in range(n):
                noise = rng.gamma(0.6, 0.4, size=(480, 1440)).astype("f4")
                block[k] = np.round(base * noise * (1 + 0.1 * np.sin(start + k)), 2)
            p[start:start + n] = block
            t[start:start + n] = 3.0 * np.arange(start, start + n)
    finally:
        nc.close()


def make_many(path: Path, *, nvars: int = 20, ntime: int = 365, ny: int = 128, nx: int = 128) -> None:
    """One chunk per time step and variable: the layout where per-chunk cost dominates."""
    import netCDF4

    nc = netCDF4.Dataset(str(path), "w", format="NETCDF4")
    try:
        nc.createDimension("time", ntime)
        nc.createDimension("lat", ny)
        nc.createDimension("lon", nx)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(ntime, dtype="f8")
        rng = np.random.default_rng(7)
        yy, xx = np.meshgrid(np.linspace(0, 3, ny), np.linspace(0, 6, nx), indexing="ij")
        base = (np.sin(yy) * np.cos(xx) + 1).astype("f4")
        for i in range(nvars):
            v = nc.createVariable(f"v{i:02d}", "f4", ("time", "lat", "lon"), zlib=True, complevel=1, shuffle=True,
                                  chunksizes=(1, ny, nx), fill_value=-9999.0)
            for start in range(0, ntime, 73):
                n = min(73, ntime - start)
                v[start:start + n] = base * rng.gamma(0.6, 0.4, size=(n, ny, nx)).astype("f4")
    finally:
        nc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "data"))
    ap.add_argument("--ntime", type=int, default=256)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, unlimited in (("precip.nc", True), ("precip_fixed.nc", False)):
        target = out / name
        if not target.exists():
            make(target, ntime=args.ntime, unlimited=unlimited)
        print(target, target.stat().st_size)
    many = out / "many.nc"
    if not many.exists():
        make_many(many)
    print(many, many.stat().st_size)


if __name__ == "__main__":
    main()
