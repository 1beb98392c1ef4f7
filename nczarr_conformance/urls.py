"""netcdf-c style dataset URLs and plain paths, parsed into a StoreSpec.

netcdf-c takes ``file:///p/x.zip#mode=nczarr,zip``, ``file:///p/x.file#mode=zarr,file``,
``s3://bucket/key#mode=nczarr,s3``; the fragment's ``mode`` list names the format
(nczarr, zarr, xarray, noxarray, consolidated) and the storage (file, zip, s3); see
``StoreSpec.pure_zarr`` for how the format flags combine. Plain paths are accepted
too: a ``.zip`` suffix or zip magic bytes mean zip, anything else a directory. A URL's
``?query`` is refused (:func:`_refuse_query`): no store gives it a meaning; paths and keys
are percent-decoded, so ``%3F`` names a ``?``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from nczarr_conformance.errors import UsageError

ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"
STORAGE_MODES = ("file", "zip", "s3")
FORMAT_MODES = ("nczarr", "zarr", "noxarray", "xarray", "consolidated")


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Where a dataset lives and how the URL asked for it to be read."""

    kind: str  # "file", "zip" or "s3"
    path: str  # filesystem path for file/zip, "bucket/key" for s3
    modes: tuple[str, ...] = ()
    params: dict[str, str] = field(default_factory=dict)
    endpoint: str | None = None  # for https URLs naming a host
    url: str = ""

    @property
    def pure_zarr(self) -> bool:
        """Pure Zarr (no NCZarr keys) was asked for: ``zarr`` or ``xarray`` in the mode.

        nczarr.md: ``mode=zarr`` is an alias of ``mode=nczarr,zarr`` and restricts the library
        to pure Zarr, so ``nczarr`` beside ``zarr`` changes nothing. nczarr.md does not name
        ``xarray``; netcdf-c infers ``zarr`` from it (dinfermodel.c ``modeinferences``) and
        sets its pure-Zarr flag for it (zarr.c ``applycontrols``), so we do too.
        ``noxarray`` alone keeps NCZarr: nczarr.md says it only disables the XArray
        convention; netcdf-c also infers ``zarr`` from it, which its issue #2647 calls a bug
        (``tests/test_url_modes.py`` pins that difference).
        """
        return "zarr" in self.modes or "xarray" in self.modes

    @property
    def xarray(self) -> bool:
        """``_ARRAY_DIMENSIONS`` written and read unless ``noxarray`` is in the mode (it beats ``xarray``)."""
        return "noxarray" not in self.modes


def _parse_fragment(fragment: str) -> tuple[tuple[str, ...], dict[str, str]]:
    modes: list[str] = []
    params: dict[str, str] = {}
    for item in fragment.split("&"):
        if not item:
            continue
        name, _, value = item.partition("=")
        name = name.strip().lower()
        if name == "mode":
            for m in value.split(","):
                m = m.strip().lower()
                if m:
                    modes.append(m)
        else:
            params[name] = unquote(value)
    return tuple(modes), params


def _sniff_zip(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head in (ZIP_MAGIC, EMPTY_ZIP_MAGIC)


def parse(url: str | os.PathLike[str]) -> StoreSpec:
    """Parse a netcdf-c URL or a plain path."""
    text = os.fspath(url)
    if not text:
        raise UsageError("empty dataset URL")
    parts = urlsplit(text) if "://" in text else None
    if parts is None:
        base, _, fragment = text.partition("#")
        modes, params = _parse_fragment(fragment)
        path = str(Path(base).expanduser())
        kind = _storage_kind(modes, path)
        return StoreSpec(kind, path, modes, params, url=text)
    _refuse_query(text, parts.query)
    scheme = parts.scheme.lower()
    modes, params = _parse_fragment(parts.fragment)
    if scheme == "file":
        path = unquote(parts.path)
        kind = _storage_kind(modes, path)
        if kind == "s3":
            raise UsageError(f"{text}: a file:// URL cannot name s3 storage")
        return StoreSpec(kind, path, modes, params, url=text)
    if scheme == "s3":
        bucket = parts.netloc
        key = unquote(parts.path).strip("/")  # %3F is a '?' in the key, as in https:// and file:// URLs
        return StoreSpec("s3", f"{bucket}/{key}".rstrip("/"), modes, params, url=text)
    if scheme == "gs3":  # netcdf-c's Google Cloud Storage form: gs3://bucket/key
        key = unquote(parts.path).strip("/")
        return StoreSpec("s3", f"{parts.netloc}/{key}".rstrip("/"), modes, params, f"https://{GOOGLE_HOST}", text)
    if scheme in ("http", "https"):
        return _parse_https(parts.netloc, parts.path, modes, params, scheme, text)
    raise UsageError(f"{text}: unsupported URL scheme {scheme!r}")


def _refuse_query(text: str, query: str) -> None:
    """A ``?query`` is refused, never dropped: netcdf-c's stores give it no meaning.

    netcdf-c's S3 URL table (unit_test/test_ncuri.c, S3TESTS) holds no query and nczarr.md
    puts every store parameter in the fragment; the one query test_ncuri.c knows is DAP4's
    constraint (``?dap4.ce=``), which no store reads. A ``?`` that belongs to a key or a file
    name is written ``%3F``.
    """
    if "?" in text.partition("#")[0]:
        raise UsageError(f"{text}: the URL query '?{query}' has no meaning for netcdf-c's stores and would be "
                         "ignored; put parameters in the fragment (#mode=nczarr,s3&aws.profile=NAME), and write a '?' "
                         "that is part of a key or file name as %3F")


#: netcdf-c's host names (libdispatch/ds3util.c: AWSHOST, GOOGLEHOST)
AWS_HOST = ".amazonaws.com"
GOOGLE_HOST = "storage.googleapis.com"


def _parse_https(host: str, path: str, modes: tuple[str, ...], params: dict[str, str],
                 scheme: str, text: str) -> StoreSpec:
    """Bucket, key, region and endpoint of an http(s) S3 URL, by netcdf-c's ``NC_s3urlrebuild`` rules.

    Virtual host (``bucket.s3[.region].amazonaws.com/key``, ``bucket.s3.region.other.host/key``) or
    path style (``[s3[.region].]host/bucket/key``); ``storage.googleapis.com`` is Google's. The table
    of cases is netcdf-c's ``unit_test/test_ncuri.c`` (tests/netcdf_c/test_ncuri.py).
    """
    path = unquote(path).strip("/")
    hostname = host.split(":")[0]
    port = host[len(hostname):]
    labels = hostname.split(".")
    bucket: str | None = None
    region: str | None = None
    if hostname.lower().endswith(AWS_HOST):
        if len(labels) == 4 and labels[0].lower() != "s3":  # bucket.s3.amazonaws.com
            bucket = labels[0]
        elif len(labels) == 4:  # s3.region.amazonaws.com
            region = labels[1]
        elif len(labels) == 5 and labels[1].lower() == "s3":  # bucket.s3.region.amazonaws.com
            bucket, region = labels[0], labels[2]
        elif len(labels) != 3:  # only s3.amazonaws.com remains
            raise UsageError(f"{text}: not an S3 host netcdf-c accepts ({hostname})")
        endpoint = f"{scheme}://s3.{region}.amazonaws.com{port}" if region else f"{scheme}://s3.amazonaws.com{port}"
    elif hostname.lower() == GOOGLE_HOST:
        endpoint = f"{scheme}://{host}"
    elif len(labels) > 3 and labels[1].lower() == "s3":  # bucket.s3.region.other.host
        bucket, region = labels[0], labels[2]
        endpoint = f"{scheme}://{'.'.join(labels[1:])}{port}"
    else:
        if len(labels) > 2 and labels[0].lower() == "s3":  # s3.region.other.host
            region = labels[1]
        endpoint = f"{scheme}://{host}"
    if bucket is None:
        bucket, _, path = path.partition("/")
        if not bucket:
            raise UsageError(f"{text}: no bucket in URL path")
    if region:
        params = {**params, "aws.region": params.get("aws.region", region)}
    return StoreSpec("s3", f"{bucket}/{path}".rstrip("/"), modes, params, endpoint, text)


def _storage_kind(modes: tuple[str, ...], path: str) -> str:
    storage = [m for m in modes if m in STORAGE_MODES]
    if storage:
        return storage[-1]
    if path.lower().endswith(".zip") or (os.path.isfile(path) and _sniff_zip(path)):
        return "zip"
    return "file"


def to_file_url(path: str, kind: str, mode: str = "nczarr") -> str:
    """The netcdf-c URL naming a local directory or zip store."""
    return f"file://{os.path.abspath(path)}#mode={mode},{kind}"
