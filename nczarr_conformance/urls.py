"""netcdf-c style dataset URLs and plain paths, parsed into a StoreSpec.

netcdf-c takes ``file:///p/x.zip#mode=nczarr,zip``, ``file:///p/x.file#mode=zarr,file``,
``s3://bucket/key#mode=nczarr,s3``; the fragment's ``mode`` list names the format
(nczarr, zarr, xarray, noxarray, consolidated) and the storage (file, zip, s3); see
``StoreSpec.pure_zarr`` for how the format flags combine. Plain paths are accepted
too: a ``.zip`` suffix or zip magic bytes mean zip, anything else a directory. A URL's
``?query`` is refused (:func:`_refuse_query`): no store gives it a meaning; paths and keys
are percent-decoded, so ``%3F`` names a ``?``.

Which store an ``http(s)://`` URL names (:func:`_parse_http`), in this order:

1. **S3, by netcdf-c's rule** (``libdispatch/ds3util.c`` ``NC_iss3``): ``s3`` or ``gs3`` in the
   mode, or a host ending ``.amazonaws.com``, or ``storage.googleapis.com``. Every form of
   netcdf-c's S3 URL table keeps its meaning (``https://s3.<region>.amazonaws.com/bucket/key``,
   ``https://host/bucket/key#mode=nczarr,s3``, virtual-host style; tests/netcdf_c/test_ncuri.py).
2. **Anything else is a plain HTTP store**, read-only: the URL is the dataset's root and each
   key is fetched with one GET below it (netcdf-c would take such a URL as DAP2). ``file`` or
   ``zip`` in the mode over http(s) is refused. What the server answers never switches the
   protocol (credentials are sent only where the URL says S3): a missing object (404) is fill,
   as on every store; a refusal worded as S3 words it (an ``x-amz-request-id`` header, an
   ``<Error><Code>`` body) is reported with the hint to add ``s3`` to the mode
   (:mod:`nczarr_conformance.stores.remote`).

Anonymous (unsigned) S3 is netcdf-c's reserved profile ``no`` (``aws.profile=no`` in the
fragment: ``NC_getactives3profile`` falls back to it and ``nczarr_test/run_corrupt.sh`` reads a
public bucket with it) or ``none`` (``nc_test/test_byterange.sh``; ``ncs3sdk_aws.cpp`` sends empty
credentials for it); the CLIs' ``--anon`` and ``storage_options={"anon": True}`` ask for it too.
``gs://bucket/key`` (also ``gcs://``) and ``az://container/key`` (also ``abfs[s]://``, the forms
fsspec and obstore take) have no netcdf-c spelling; ``anon`` in their fragment (or the option)
reads them unsigned.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from nczarr_conformance.errors import UsageError

ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"
STORAGE_MODES = ("file", "zip", "s3")
FORMAT_MODES = ("nczarr", "zarr", "noxarray", "xarray", "consolidated")
#: netcdf-c's reserved AWS profile names meaning "no credentials": requests go unsigned
ANONYMOUS_PROFILES = ("no", "none")
#: kinds read through obstore (stores/remote.py); "s3" is read there too when anonymous
REMOTE_KINDS = ("http", "gs", "az")
_GS_SCHEMES = ("gs", "gcs")
_AZ_SCHEMES = ("az", "abfs", "abfss", "adl", "azure")
_TRUE = ("", "1", "true", "yes", "on")
#: a local path ending so names kerchunk references (JSON file; Parquet directory): kind "reference"
REFERENCE_SUFFIXES = (".json", ".parq", ".parquet")
#: what an Icechunk repository on a file system holds: ``snapshots/``, and ``refs/`` (spec v1) or the ``repo``
#: file (spec v2): kind "icechunk"
ICECHUNK_SNAPSHOTS, ICECHUNK_MARKS = "snapshots", ("refs", "repo")


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Where a dataset lives and how the URL asked for it to be read."""

    kind: str  # "file", "zip", "reference", "icechunk", "s3", "http", "gs" or "az"
    path: str  # filesystem path for file/zip, "bucket/key" for s3 and gs, "container/key" for az, the URL for http
    modes: tuple[str, ...] = ()
    params: dict[str, str] = field(default_factory=dict)
    endpoint: str | None = None  # for https URLs naming a host
    url: str = ""
    #: ``storage_options=`` of the Python API (see :func:`parse`), for the store's client
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def anonymous(self) -> bool:
        """Unsigned requests: netcdf-c's ``aws.profile=no``/``none``, ``anon`` in the fragment or the options."""
        profile = self.params.get("aws.profile", self.params.get("awsprofile"))
        anon = self.params.get("anon")
        return (profile in ANONYMOUS_PROFILES or (anon is not None and anon.lower() in _TRUE)
                or bool(self.options.get("anon")))

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


def parse(url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> StoreSpec:
    """Parse a netcdf-c URL or a plain path; ``storage_options`` ride along for the store's client.

    Options given for a local path or ``file://`` URL are refused (no local store takes any).
    """
    spec = _parse(url)
    if not storage_options:
        return spec
    if spec.kind in ("file", "zip", "icechunk"):
        raise UsageError(f"{spec.url}: storage_options are for remote stores (s3://, http(s)://, gs://, az://); "
                         f"a {spec.kind} store takes none")
    return dataclasses.replace(spec, options=dict(storage_options))


def _parse(url: str | os.PathLike[str]) -> StoreSpec:
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
    if scheme == "icechunk":  # icechunk://PATH: a local Icechunk repository (stores/icechunk_store.py)
        storage = [m for m in modes if m in STORAGE_MODES]
        if storage:
            raise UsageError(f"{text}: mode {storage[-1]!r} names another storage; an icechunk:// URL is a repository")
        path = unquote(f"{parts.netloc}{parts.path}")
        return StoreSpec("icechunk", str(Path(path).expanduser()), modes, params, url=text)
    if scheme == "s3":
        bucket = parts.netloc
        key = unquote(parts.path).strip("/")  # %3F is a '?' in the key, as in https:// and file:// URLs
        return StoreSpec("s3", f"{bucket}/{key}".rstrip("/"), modes, params, url=text)
    if scheme == "gs3":  # netcdf-c's Google Cloud Storage form: gs3://bucket/key
        key = unquote(parts.path).strip("/")
        return StoreSpec("s3", f"{parts.netloc}/{key}".rstrip("/"), modes, params, f"https://{GOOGLE_HOST}", text)
    if scheme in ("http", "https"):
        return _parse_http(parts.netloc, parts.path, modes, params, scheme, text)
    if scheme in _GS_SCHEMES or scheme in _AZ_SCHEMES:
        kind = "gs" if scheme in _GS_SCHEMES else "az"
        _refuse_local_modes(text, modes)
        container = parts.netloc.partition("@")[0]  # abfs://container@account.dfs.core.windows.net/key
        if not container:
            raise UsageError(f"{text}: no {'bucket' if kind == 'gs' else 'container'} in URL")
        key = unquote(parts.path).strip("/")
        return StoreSpec(kind, f"{container}/{key}".rstrip("/"), modes, params, url=text)
    raise UsageError(f"{text}: unsupported URL scheme {scheme!r} (file, s3, gs3, http(s), gs, az/abfs, icechunk)")


def _refuse_local_modes(text: str, modes: tuple[str, ...]) -> None:
    local = [m for m in modes if m in ("file", "zip")]
    if local:
        raise UsageError(f"{text}: mode {local[-1]!r} names local storage; a remote URL cannot be read as one "
                         "(download a zip store to read it)")


def anonymous_url(url: str) -> str:
    """``url`` with unsigned access spelled in its fragment (the CLIs' ``--anon``): netcdf-c's
    ``aws.profile=no`` for S3, ``anon`` for gs:// and az://; an http(s) store is read unsigned anyway.
    A local path, or a URL naming another AWS profile, is refused in one line."""
    spec = parse(url)
    if spec.anonymous or spec.kind == "http":
        return url
    if spec.kind in ("file", "zip", "icechunk"):
        raise UsageError(f"{url}: --anon is for remote stores (s3://, gs://, az://); a {spec.kind} store has no "
                         "credentials")
    if spec.kind == "s3" and ("aws.profile" in spec.params or "awsprofile" in spec.params):
        raise UsageError(f"{url}: --anon and the profile the URL names contradict each other; keep one")
    item = "aws.profile=no" if spec.kind == "s3" else "anon"
    base, hashmark, fragment = url.partition("#")
    return f"{base}#{fragment}&{item}" if hashmark and fragment else f"{base}#{item}"


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


def _parse_http(host: str, path: str, modes: tuple[str, ...], params: dict[str, str],
                scheme: str, text: str) -> StoreSpec:
    """S3 when netcdf-c's ``NC_iss3`` says so (see the module docstring), else a plain HTTP store."""
    hostname = host.split(":")[0].lower()
    if "s3" in modes or "gs3" in modes or hostname.endswith(AWS_HOST) or hostname == GOOGLE_HOST:
        return _parse_https(host, path, modes, params, scheme, text)
    _refuse_local_modes(text, modes)
    base = f"{scheme}://{host}{path}".rstrip("/")
    return StoreSpec("http", base, modes, params, url=text)


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
    if path.lower().rstrip("/").endswith(REFERENCE_SUFFIXES) and not _zarr_directory(path):
        return "reference"  # kerchunk references (stores/references.py)
    if is_icechunk_directory(path) and not _zarr_directory(path):
        return "icechunk"  # an Icechunk repository (stores/icechunk_store.py)
    return "file"


def is_icechunk_directory(path: str) -> bool:
    """Whether the local directory ``path`` is an Icechunk repository (``snapshots/`` and ``refs/`` or ``repo``)."""
    return (os.path.isdir(os.path.join(path, ICECHUNK_SNAPSHOTS))
            and any(os.path.exists(os.path.join(path, name)) for name in ICECHUNK_MARKS))


def _zarr_directory(path: str) -> bool:
    """A directory store that happens to be named like references (``x.json/.zgroup``): still a directory."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, name))
                                       for name in (".zgroup", ".zarray", "zarr.json", ".nczarr"))


def to_file_url(path: str, kind: str, mode: str = "nczarr") -> str:
    """The netcdf-c URL naming a local directory or zip store."""
    return f"file://{os.path.abspath(path)}#mode={mode},{kind}"
