"""The names of the layouts, in a module with no imports: the CLIs build their parsers
(``choices=``) from them without loading numpy, and ``--help`` stays instant; and which format takes shards
(:func:`shard_refusal`), which the CLI asks before loading anything."""
from __future__ import annotations

#: layouts the writer can produce
WRITE_FLAVORS = ("nczarr-4.10", "nczarr-2", "nczarr-2-upper", "zarr")
#: what the CLI and API accept for a write flavor → the layout written
FLAVOR_ALIASES = {"nczarr": "nczarr-4.10", "nczarr-4.10": "nczarr-4.10", "nczarr-2": "nczarr-2",
                  "nczarr-2-upper": "nczarr-2-upper", "upper": "nczarr-2-upper", "zarr": "zarr"}
#: the Zarr v3 layouts (``--zarr-format 3``): pure Zarr v3 (zarr3/writer.py), netcdf-c's draft NCZarr v3
#: (zarr3/draft_writer.py) and NZ-1.0 (zarr3/nz_writer.py)
V3_FLAVORS = ("zarr", "nczarr-v3-draft", "nz")
#: layouts nczarr-check can be told to expect (``--expect``)
CHECK_FLAVORS = ("nczarr-v1", "nczarr-2-upper", "nczarr-2", "nczarr-4.10", "zarr", "zarr-v3", "nczarr-v3-draft", "nz")
#: how char attributes whose text parses as JSON are written (nczarr/attrs.py): lossless (as JSON strings,
#: the default) or spec (Appendix D case 3, as that JSON)
JSON_ATTRIBUTE_MODES = ("lossless", "spec")
#: ``--char-as`` values: the char dtype written, "S1" for ``|S1`` or ">S1" (nczarr/writer.py CHAR_DTYPES)
CHAR_AS_CHOICES = ("S1", ">S1")


def shard_refusal(zarr_format: int | None, shard: int | None) -> str | None:
    """Why ``shard`` cannot be written in ``zarr_format`` (None: the default, 2), or None when it can.

    Shards are Zarr v3's ``sharding_indexed`` codec; Zarr v2 has none. This is the rule's one statement:
    ``convert`` and ``write`` raise it as a UsageError, ``nc2nczarr`` says it as a usage error before it opens
    anything, for runs that take no shard of their own too (``--concat``, ``--append``, ``--reference``), where
    the option would otherwise be dropped unsaid. Here, with no imports, so the command's check loads nothing.
    """
    if shard is not None and zarr_format != 3:
        return "--shard needs --zarr-format 3 (Zarr v2 has no shards)"
    return None
