"""How a reference output names its objects, for ``--concat --reference``'s merge (conversion/reference_concat.py).

The merge moves each file's chunks along DIM by the file's offset in chunks, keeps the first file's metadata and
refuses a file whose array differs from the first file's: it needs a chunk key taken apart into (array, index)
and put back together, and the fields one Zarr array has once. Kerchunk references are Zarr v2
(``tas/.zarray``, ``tas/3.0.0``); an Icechunk repository is Zarr v3 as the single-file writer lays it out
(``tas/zarr.json``, ``tas/c/3/0/0``: ``chunk_key_encoding`` ``default`` with ``/``; the split itself is
:func:`nczarr_conformance.keys.split_v3_chunk`, which the Icechunk collector counts inline bytes by too). The merge
spells keys only through these two classes: each per-file share is made in the output's own layout by its own
writer (conversion/icechunk_references.py's for a repository), so no key is translated from one layout into the
other.
"""
from __future__ import annotations

import json
from typing import Any

from nczarr_conformance import keys


class KerchunkKeys:
    """Zarr v2 as kerchunk holds it: ``.zarray``/``.zattrs``/``.zgroup``/``.zmetadata``, chunks ``array/i.j.k``."""

    #: the .zarray fields one Zarr array has once: a file whose array differs in one of them cannot share its chunks
    SHARED_FIELDS = ("chunks", "dtype", "fill_value", "compressor", "filters", "order", "dimension_separator")

    def is_metadata(self, name: str) -> bool:
        """Whether the object ``name`` (no leading /) is metadata, not a chunk."""
        return name.rpartition("/")[2].startswith(".")

    def array_fields(self, name: str, text: str) -> tuple[str, dict[str, Any]] | None:
        """(array, the fields it has once) when ``name`` is an array's metadata object holding ``text``, else None."""
        array, _, leaf = name.rpartition("/")
        if leaf != ".zarray":
            return None
        doc = json.loads(text)
        return array, {field: doc.get(field) for field in self.SHARED_FIELDS}

    @staticmethod
    def chunk_shape(fields: dict[str, Any]) -> list[int]:
        return [int(c) for c in fields["chunks"]]

    def split(self, name: str) -> tuple[str, list[int]]:
        """The chunk key ``name`` as (array, index)."""
        array, _, index = name.rpartition("/")
        return array, [int(i) for i in index.split(".")]

    def join(self, array: str, index: list[int]) -> str:
        text = ".".join(str(i) for i in index)
        return f"{array}/{text}" if array else text


class V3Keys:
    """Zarr v3 as the Icechunk writer lays it out (zarr3/v3_writer.py): ``zarr.json``, chunks ``array/c/i/j/k``
    (``array/c`` for a scalar)."""

    #: the zarr.json fields one Zarr array has once
    SHARED_FIELDS = ("chunk_grid", "data_type", "fill_value", "codecs", "chunk_key_encoding", "storage_transformers")

    def is_metadata(self, name: str) -> bool:
        return name.rpartition("/")[2] == "zarr.json"

    def array_fields(self, name: str, text: str) -> tuple[str, dict[str, Any]] | None:
        array, _, leaf = name.rpartition("/")
        if leaf != "zarr.json":
            return None
        doc = json.loads(text)
        if doc.get("node_type") != "array":
            return None
        return array, {field: doc.get(field) for field in self.SHARED_FIELDS}

    @staticmethod
    def chunk_shape(fields: dict[str, Any]) -> list[int]:
        return [int(c) for c in fields["chunk_grid"]["configuration"]["chunk_shape"]]

    def split(self, name: str) -> tuple[str, list[int]]:
        found = keys.split_v3_chunk(name)  # the store's collector counts inline bytes per array by it too
        if found is None:
            raise ValueError(f"{name}: not a Zarr v3 chunk key of encoding 'default' with '/'")
        return found

    def join(self, array: str, index: list[int]) -> str:
        return "/".join([array, "c", *(str(i) for i in index)])


#: a layout by output kind: what a per-file task makes and the merge reads
KERCHUNK = KerchunkKeys()
ZARR_V3 = V3Keys()
ReferenceKeys = KerchunkKeys | V3Keys
