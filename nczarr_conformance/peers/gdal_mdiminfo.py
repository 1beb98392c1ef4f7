"""``gdalmdiminfo -detailed URL`` as a script of GDAL's Python bindings (``osgeo``), for the GDAL peer
(peers/implementations.py): the same ``GDALMultiDimInfo`` call of the same ``libgdal`` (Debian's python3-gdal
and gdal-bin are built from one source and link one library), the same output, error lines and exit status
as the tool's ``main``, so that a fork server that imported ``osgeo.gdal`` once (peers/forkserver.py) reads
each store without loading GDAL's hundred-odd libraries and its drivers again (issue #26).

Standalone on purpose (standard library and ``osgeo`` only): it runs under the interpreter that has the
bindings (Debian's ``/usr/bin/python3``), not ours.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """gdalmdiminfo's ``main``: open as multidimensional with verbose errors, print the detailed JSON."""
    from osgeo import gdal  # type: ignore[import-not-found, unused-ignore]  # here: our own interpreter has none

    url = argv[-1]
    dataset = gdal.OpenEx(url, gdal.OF_MULTIDIM_RASTER | gdal.OF_VERBOSE_ERROR)
    if dataset is None:
        print(f"gdalmdiminfo failed - unable to open '{url}'.", file=sys.stderr)
        return 1
    text = gdal.MultiDimInfo(dataset, detailed=True, as_text=True)
    if text is None:
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
