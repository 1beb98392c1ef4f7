"""Stores read through obstore (stores/remote.py) against real servers on 127.0.0.1 (issue 23).

A plain HTTP server (Python's ``http.server`` serving a converted store's directory, with an index
page per directory and no Range support) and moto's S3 server with a public-read bucket policy.
Nothing is patched: each test speaks HTTP to a server in this process. Expected values come from
the source netCDF file (netCDF4-python) or from the store's own metadata files, never from the
store under test.
"""
from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import StoreError, StoreUnavailableError, UsageError
from nczarr_conformance.limits import LimitError
from nczarr_conformance.model import diff
from nczarr_conformance.testing.ignores import CONTIGUOUS
from nczarr_conformance.testing.source import read_source
from tests.conftest import require_module

require_module("obstore")

REPO = Path(__file__).resolve().parents[2]


class Web:
    """``http.server`` over a directory on 127.0.0.1; records each request; answers chosen paths with a status."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.faults: dict[str, int] = {}  # regular expression on the path -> status to answer
        self.s3_words = False  # answer a fault as S3 does (an XML <Error> body, an x-amz-request-id header)
        self.sizeless = ""  # "chunked" or "close": a file's body without Content-Length, framed that way
        self.soft404 = False  # answer a missing file with 200 and an HTML page, as some servers and CDNs do
        self.stall = ""  # regular expression on the path: such a request is held unanswered until ``release``
        self.stalled = threading.Event()  # set when a request was first held
        self.release = threading.Event()
        self.log: list[tuple[str, str, dict[str, str]]] = []  # method, path, headers
        self._lock = threading.Lock()
        web = self

        class Handler(http.server.SimpleHTTPRequestHandler):  # serves no Range: every GET is the whole file
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: with Nagle on, the body waits for the client's delayed
            # ACK (40 ms on Linux) on every request, seconds a command; a real server sends them together
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def send_head(self):  # type: ignore[no-untyped-def]
                with web._lock:
                    web.log.append((self.command, self.path, dict(self.headers.items())))
                    status = next((s for pattern, s in web.faults.items() if re.search(pattern, self.path)), None)
                if web.stall and re.search(web.stall, self.path):
                    web.stalled.set()
                    web.release.wait(120)
                    self.close_connection = True
                    return None
                if status is not None and web.s3_words:
                    body = (b"<?xml version='1.0'?><Error><Code>AccessDenied</Code>"
                            b"<Message>Access Denied</Message></Error>")
                    self.send_response(status)
                    self.send_header("x-amz-request-id", "nczarr-test")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return None
                if status is not None:
                    self.send_error(status)
                    return None
                path = Path(self.translate_path(self.path))
                if web.soft404 and not path.exists():
                    page = b"<!DOCTYPE html>\n<html><body><h1>Welcome</h1></body></html>\n"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    if self.command == "GET":
                        self.wfile.write(page)
                    return None
                if web.sizeless and path.is_file():
                    self._send_sizeless(path.read_bytes())
                    return None
                return super().send_head()

            def _send_sizeless(self, body: bytes) -> None:
                """200 and the body with no Content-Length: chunked (HTTP/1.1), or ended by closing the connection."""
                self.send_response(200)
                if web.sizeless == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if self.command != "GET":
                    return
                framed = body
                if web.sizeless == "chunked":
                    pieces = (body[start:start + 1000] for start in range(0, len(body), 1000))
                    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
                try:
                    self.wfile.write(framed)
                except OSError:  # the reader refused the body part way (over its bound) and hung up
                    self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def gets(self, pattern: str = "") -> list[str]:
        with self._lock:
            return [path for method, path, _ in self.log if method == "GET" and re.search(pattern, path)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, rich_nc):
    """rich.nc converted twice (consolidated, and not: the reader then walks the objects), served over HTTP."""
    root = tmp_path_factory.mktemp("web")
    ncz.convert(str(rich_nc), str(root / "rich.file"))
    ncz.convert(str(rich_nc), str(root / "plain.file"), consolidate=False)
    web = Web(root)
    yield web
    web.close()


@pytest.fixture
def web(served):
    served.faults.clear()
    served.log.clear()
    served.s3_words = False
    served.sizeless = ""
    served.soft404 = False
    served.stall = ""
    served.stalled.clear()
    served.release.clear()
    yield served
    served.release.set()  # a request still held ends now


def cli(tool: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{tool}", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})}, check=False)


# ---- plain HTTP ---------------------------------------------------------------------------------------------------

@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
@pytest.mark.parametrize("name", ["rich.file", "plain.file"])
def test_an_http_url_reads_the_source_file_s_dataset(web, rich_nc, name):
    """Not S3 by netcdf-c's rule (no s3 mode, not an AWS/Google host): one GET a key, no credentials asked for."""
    got = open_dataset(f"{web.url}/{name}#mode=nczarr")
    assert diff(read_source(str(rich_nc)), got, ignore=CONTIGUOUS) == []
    assert web.gets() and all("Authorization" not in h for _, _, h in web.log)
    assert not web.gets(r"/$")  # an NCZarr store names its objects: no index page read (no listing)


def test_no_range_request_is_sent(web):
    """The server does not do Range (http.server ignores it): each object is one whole GET."""
    with ncz.open(f"{web.url}/rich.file") as ds:
        ds["v_f8"][...]
    assert web.gets(r"/v_f8/") and all("Range" not in h for _, _, h in web.log)


def test_a_missing_chunk_is_fill(web, served):
    """A 404 on a chunk reads as the fill value its .zarray declares, as on a local store."""
    zarray = json.loads((served.root / "rich.file" / "v_f8" / ".zarray").read_text())
    web.faults[r"/rich\.file/v_f8/0$"] = 404
    with ncz.open(f"{web.url}/rich.file") as ds:
        values = ds["v_f8"][...]
    assert web.gets(r"/v_f8/0$")
    assert np.all(values[: zarray["chunks"][0]] == zarray["fill_value"])


@pytest.mark.parametrize("status", [403, 401])
def test_a_refused_chunk_is_one_line_naming_the_store_and_the_status(web, status):
    web.faults[r"/v_f8/0$"] = status
    with ncz.open(f"{web.url}/rich.file") as ds, pytest.raises(StoreError) as err:
        ds["v_f8"][...]
    text = str(err.value)
    assert "\n" not in text and f"HTTP {status}" in text and "access denied" in text and "<html" not in text.lower()
    done = cli("dump", "-v", "v_f8", f"{web.url}/rich.file")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and f"HTTP {status}" in done.stderr, done.stderr


def test_an_s3_worded_refusal_gets_a_hint_and_no_credentials(web):
    """What the server answers does not switch the protocol: no signed request follows, the error says what to add."""
    web.s3_words = True
    web.faults[r"/\.z"] = 403
    with pytest.raises(StoreError, match=r"access denied \(HTTP 403.*answers as S3: add s3 to the mode") as err:
        ncz.open(f"{web.url}/rich.file")
    assert "\n" not in str(err.value)
    assert web.log and all("Authorization" not in h and "authorization" not in h for _, _, h in web.log)


def test_a_server_error_is_retried_then_could_not_check(web):
    """A 500 is tried 3 times (as S3 reads are), then StoreUnavailableError; nczarr-check says it could not check."""
    web.faults[r"/v_f8/0$"] = 500
    with ncz.open(f"{web.url}/rich.file") as ds, pytest.raises(StoreUnavailableError, match=r"HTTP 500") as err:
        ds["v_f8"][...]
    assert "\n" not in str(err.value)
    assert len(web.gets(r"/v_f8/0$")) == 3
    done = cli("check", "--deep", f"{web.url}/rich.file")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "HTTP 500" in done.stderr, done.stderr


def test_metadata_over_its_cap_is_refused_from_its_declared_size(web, monkeypatch):
    """Bounded reads stay on top of the library: Content-Length over the metadata cap is refused, naming it."""
    monkeypatch.setenv("NCZARR_MAX_METADATA", "64")
    with pytest.raises(LimitError, match=r"rich\.file/\.z\w+: \d+ bytes, more than the 64-byte limit"):
        ncz.open(f"{web.url}/rich.file")


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_server_that_sends_no_content_length_is_read_within_the_declared_bound(web, rich_nc, framing, monkeypatch):
    """obstore refuses a body without Content-Length ("could not get … after 3 attempts", as if the server were
    down): it is read, streamed, and a body past the caller's bound is refused while it streams."""
    web.sizeless = framing
    got = open_dataset(f"{web.url}/rich.file#mode=nczarr")
    assert diff(read_source(str(rich_nc)), got, ignore=CONTIGUOUS) == []
    done = cli("dump", "-h", f"{web.url}/rich.file")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    monkeypatch.setenv("NCZARR_MAX_METADATA", "64")
    with pytest.raises(LimitError, match=r"rich\.file/\.z\w+: more bytes, more than the 64-byte limit"):
        ncz.open(f"{web.url}/rich.file")


def test_a_server_without_content_length_gets_the_client_options_headers(web, rich_nc):
    """The standard library's client reading a sizeless server sends what client_options make obstore send."""
    web.sizeless = "chunked"
    options = {"client_options": {"default_headers": {"authorization": "Bearer nczarr"}, "user_agent": "ncz-test/1"}}
    want, compared = dict(read_source(str(rich_nc)).root.walk()), 0
    with ncz.open(f"{web.url}/rich.file#mode=nczarr", storage_options=options) as got:
        for group in got.walk():
            for name, var in group.variables.items():
                model = want[group.path].variables[name]
                np.testing.assert_array_equal(var[...], model.data, err_msg=f"{group.path}/{name}")
                compared += 1
    assert compared > 5
    gets = [h for method, _, h in web.log if method == "GET"]
    assert gets and all((h.get("Authorization") or h.get("authorization"), h.get("User-Agent") or
                         h.get("user-agent")) == ("Bearer nczarr", "ncz-test/1") for h in gets), gets


def test_a_soft_404_server_reads_pure_zarr_and_names_a_needed_object_it_lacks(web, served, rich_nc, tmp_path):
    """A server answering 200 and an HTML page for a missing key broke every pure-Zarr read at the optional
    /.zmetadata probe ("not valid JSON"): a page where an object was probed for is absent; a needed one is
    one line naming its key and the page."""
    web.soft404 = True
    pure = served.root / "pure.file"
    if not pure.exists():
        ncz.convert(str(rich_nc), str(pure), flavor="zarr", consolidate=False)
    assert not (pure / ".zmetadata").exists()
    local, remote = str(pure), f"{web.url}/pure.file"
    want, got = cli("dump", "-h", local), cli("dump", "-h", remote)  # -h: a missing chunk's page is no fill
    assert (got.returncode, got.stderr) == (0, ""), got.stderr
    assert got.stdout.replace(remote, local) == want.stdout
    assert web.gets(r"/pure\.file/\.zmetadata$")  # probed, and the page read as absent
    damaged = served.root / "damaged.file"
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(served.root / "plain.file", damaged)
    (damaged / "v_f8" / ".zarray").unlink()
    line = _one_line(cli("dump", f"{web.url}/damaged.file"))
    assert line.endswith("/v_f8/.zarray: an HTML page, not JSON (a web server answering 200 for a missing "
                         "object?) (listed in its group)"), line


def test_a_zmetadata_that_is_not_json_is_read_around_with_a_warning(tmp_path, served, rich_nc):
    """/.zmetadata only summarises the objects: one that is not JSON is a warning, the objects are read."""
    store = tmp_path / "rich.file"
    shutil.copytree(served.root / "rich.file", store)
    (store / ".zmetadata").write_bytes(b"garbage")
    with pytest.warns(UserWarning, match=r"^/\.zmetadata: not valid JSON .*; read as absent"):
        got = open_dataset(str(store))
    assert diff(read_source(str(rich_nc)), got, ignore=CONTIGUOUS) == []


@pytest.mark.parametrize("name", ["rich.file", "plain.file"])
def test_nczarr_dump_and_check_on_an_http_url_print_what_they_print_for_the_directory(web, served, name):
    """nczarr-check lists the store through the server's index pages; its report is the directory's."""
    local, remote = str(served.root / name), f"{web.url}/{name}"
    for args in (["dump", "-s"], ["check", "--deep"]):
        want, got = cli(*args, local), cli(*args, remote)
        assert (got.returncode, got.stderr) == (want.returncode, want.stderr), got.stderr
        assert got.stdout.replace(remote, local) == want.stdout


def test_an_unlistable_server_is_one_line_for_nczarr_check(web):
    """nczarr-check lists the store: over plain HTTP that is the index pages; none there is one line, exit 2."""
    web.faults[r"/$"] = 404
    done = cli("check", f"{web.url}/rich.file")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no directory index" in done.stderr, done.stderr


def test_an_http_store_is_read_only(web, rich_nc):
    with pytest.raises(UsageError, match="read-only"):
        ncz.convert(str(rich_nc), f"{web.url}/new.file")


def test_the_engine_passes_storage_options_to_the_client(web, rich_nc):
    """``storage_options`` reach the HTTP client (a header the server sees) and the Dataset is netcdf4's."""
    xr = require_module("xarray")
    options = {"client_options": {"default_headers": {"x-nczarr-test": "engine"}}}
    with xr.open_dataset(f"{web.url}/rich.file#mode=nczarr", engine="nczarr", storage_options=options) as got, \
            xr.open_dataset(rich_nc, engine="netcdf4") as want:
        xr.testing.assert_identical(got.load(), want.load())
    assert web.log and all(h.get("x-nczarr-test") == "engine" for _, _, h in web.log)


def test_open_takes_storage_options_and_refuses_them_for_a_local_path(web, served):
    with ncz.open(f"{web.url}/rich.file", storage_options={"client_options": {"default_headers": {"x-t": "1"}}}):
        pass
    assert all(h.get("x-t") == "1" for _, _, h in web.log)
    with pytest.raises(UsageError, match="storage_options are for remote stores"):
        ncz.open(served.root / "rich.file", storage_options={"anon": True})


# ---- unsigned S3 on moto -----------------------------------------------------------------------------------------

def _policy(bucket: str) -> str:
    # AWS authorizes GET and HEAD with s3:GetObject; moto 5 asks a HEAD for "s3:HeadObject" (its own name), and
    # our reader HEADs the root once to pin the dataset it opened (stores/s3_generation.py).
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": ["s3:GetObject", "s3:HeadObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*"}]})


@pytest.fixture(scope="module")
def buckets(moto_server, rich_nc):
    """A public-read bucket (by policy) and a signed-only one, each holding rich.nc converted (signed, by us)."""
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    names = {"public": f"pub-{os.getpid()}", "private": f"priv-{os.getpid()}"}
    for name in names.values():
        client.create_bucket(Bucket=name)
        ncz.convert(str(rich_nc), f"s3://{name}/ds#mode=nczarr,s3")
    client.put_bucket_policy(Bucket=names["public"], Policy=_policy(names["public"]))
    return names


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
@pytest.mark.s3
@pytest.mark.parametrize("spelling", ["#mode=nczarr,s3&aws.profile=no", "#mode=nczarr,s3&aws.profile=none",
                                      "#anon", "options"])
def test_a_public_bucket_reads_unsigned(buckets, rich_nc, spelling):
    url = f"s3://{buckets['public']}/ds" + ("" if spelling == "options" else spelling)
    options = {"anon": True} if spelling == "options" else None
    with ncz.open(url, storage_options=options) as ds:
        assert ds.store.kind == "s3" and type(ds.store).__name__ == "RemoteStore"
        got = ds["v_f8"][...]
    source = read_source(str(rich_nc))
    np.testing.assert_array_equal(got, source.root.variables["v_f8"].data)


@pytest.mark.s3
def test_a_signed_only_bucket_refuses_anonymous_reads_in_one_line(buckets, monkeypatch):
    url = f"s3://{buckets['private']}/ds#mode=nczarr,s3&aws.profile=no"
    with pytest.raises(StoreError, match=r"access denied \(HTTP 403.*unsigned.*not public") as err:
        ncz.open(url)
    assert "\n" not in str(err.value)
    with ncz.open(f"s3://{buckets['private']}/ds"):  # the same bucket, signed: readable
        pass
    done = cli("dump", "-h", "--anon", f"s3://{buckets['private']}/ds")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not public" in done.stderr, done.stderr


@pytest.mark.s3
def test_the_clis_read_a_public_bucket_with_anon_and_no_credentials(buckets, moto_server, rich_nc, tmp_path):
    """--anon with no credentials anywhere: nczarr-dump prints what it prints for the local conversion."""
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "x"),
           "AWS_CONFIG_FILE": str(tmp_path / "y")}
    ncz.convert(str(rich_nc), str(tmp_path / "ds"))
    want = cli("dump", str(tmp_path / "ds"))
    got = cli("dump", "--anon", f"s3://{buckets['public']}/ds", env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    # the path-style https form names the endpoint itself (netcdf-c's form 8), and keeps its S3 meaning
    path_style = f"{moto_server}/{buckets['public']}/ds#mode=nczarr,s3&aws.profile=no"
    assert cli("dump", path_style, env={**env, "AWS_ENDPOINT_URL": ""}).stdout == want.stdout
    checked = cli("check", "--anon", f"s3://{buckets['public']}/ds", env=env)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.s3
def test_the_engine_reads_a_public_bucket_with_storage_options(buckets, rich_nc):
    xr = require_module("xarray")
    with xr.open_dataset(f"s3://{buckets['public']}/ds#mode=nczarr,s3", engine="nczarr",
                         storage_options={"anon": True}) as got, xr.open_dataset(rich_nc, engine="netcdf4") as want:
        xr.testing.assert_identical(got.load(), want.load())


@pytest.mark.s3
def test_anonymous_writes_are_refused_before_anything_is_sent(buckets, rich_nc):
    with pytest.raises(UsageError, match="read-only"):
        ncz.convert(str(rich_nc), f"s3://{buckets['public']}/new#mode=nczarr,s3&aws.profile=no")


@pytest.mark.s3
def test_signed_storage_options_name_the_endpoint_and_refuse_unknown_keys(buckets, moto_server, monkeypatch, rich_nc):
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    url = f"s3://{buckets['private']}/ds"
    with ncz.open(url, storage_options={"client_kwargs": {"endpoint_url": moto_server}}) as ds:
        assert ds.store.kind == "s3"
    with pytest.raises(UsageError, match=r"storage option\(s\) colour not taken"):
        ncz.open(url, storage_options={"colour": "red", "endpoint_url": moto_server})
    out = f"s3://{buckets['private']}/written"
    ncz.write(read_source(str(rich_nc)), out, storage_options={"endpoint_url": moto_server})
    with ncz.open(out, storage_options={"endpoint_url": moto_server}) as ds:
        assert "v_f8" in ds
    converted = f"s3://{buckets['private']}/converted"
    ncz.convert(str(rich_nc), converted, storage_options={"region_name": "us-east-1", "endpoint_url": moto_server})
    got = open_dataset(f"{moto_server}/{buckets['private']}/converted#mode=nczarr,s3")  # the path-style form
    assert diff(read_source(str(rich_nc)), got, ignore=CONTIGUOUS) == []


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
def test_gs_and_az_urls_reach_obstore_with_their_options():
    """No GCS or Azure emulator runs here (reports/remote-stores.md): what is checked is that the URL and the
    options reach the library's store, whose own checks answer (a bad option is one line, exit 2)."""
    with pytest.raises(UsageError, match="gs://b/k") as err:
        ncz.open("gs://b/k", storage_options={"no_such_option": 1})
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="az://c/k") as err:
        ncz.open("az://c/k", storage_options={"no_such_option": 1})
    assert "\n" not in str(err.value)


def test_the_benchmark_script_still_imports():
    """reports/remote-stores.md's numbers come from benchmarks/remote_stores.py; it must stay runnable."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "remote_stores.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "obstore" in done.stdout, done.stderr


# ---- Azure Blob on Azurite (Microsoft's emulator, from npm; scripts/test installs it) ------------------------------
# gs:// has no emulator that obstore can speak to here: gcp-storage-emulator (PyPI) installs and runs offline, but
# answers the XML API's GET without Last-Modified (obstore refuses the object) and has no ?list-type=2 listing (501).

AZURITE_ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key (its documentation)
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _azurite_binary() -> str:
    from tests.conftest import missing_peer

    home = Path(os.environ.get("NCZ_AZURITE_DIR", Path.home() / ".cache" / "nczarr-azurite"))
    found = shutil.which("azurite-blob") or next(
        (str(p) for p in [home / "node_modules" / ".bin" / "azurite-blob"] if p.exists()), None)
    if found is None:
        missing_peer(f"azurite-blob not found on PATH nor in {home} (scripts/test installs it: npm install azurite)")
    return found


def _create_container(base: str, name: str, public: bool) -> None:
    """Azure's Create Container, signed with the account key (SharedKey): no client library needed for one call."""
    import base64
    import email.utils
    import hashlib
    import hmac
    import http.client
    from urllib.parse import urlsplit

    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06"}
    if public:
        headers["x-ms-blob-public-access"] = "container"  # anonymous GET and LIST
    canonical = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    to_sign = "PUT\n" + "\n" * 11 + canonical + f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
    digest = hmac.new(base64.b64decode(AZURITE_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {AZURITE_ACCOUNT}:{base64.b64encode(digest).decode()}"
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("PUT", f"/{AZURITE_ACCOUNT}/{name}?restype=container", body=b"", headers=headers)
    response = conn.getresponse()
    response.read()
    assert response.status == 201, (response.status, response.reason)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory, rich_nc):
    """Azurite's blob service on 127.0.0.1, in memory; containers "pub" (public) and "priv", each holding rich.nc
    converted to a directory and uploaded object by object (signed, by obstore)."""
    import socket
    import time

    import obstore
    from obstore.store import AzureStore

    from tests.conftest import _free_port

    port = _free_port()
    proc = subprocess.Popen([_azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                             "--inMemoryPersistence", "--skipApiVersionCheck", "--silent"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("azurite-blob did not start within 30 s")
                time.sleep(0.2)
        local = tmp_path_factory.mktemp("az") / "ds"
        ncz.convert(str(rich_nc), str(local))
        env = {"AZURITE_BLOB_STORAGE_URL": base, "AZURE_STORAGE_USE_EMULATOR": "true"}
        os.environ["AZURITE_BLOB_STORAGE_URL"] = base  # where use_emulator points obstore (read when a store is made)
        for name in ("pub", "priv"):
            _create_container(base, name, public=name == "pub")
            store = AzureStore(name, use_emulator=True, client_options={"allow_http": True})
            for path in local.rglob("*"):
                if path.is_file():
                    obstore.put(store, f"ds/{path.relative_to(local).as_posix()}", path.read_bytes())
        yield env, local
    finally:
        os.environ.pop("AZURITE_BLOB_STORAGE_URL", None)
        proc.kill()  # in-memory: nothing to flush (it takes over 10 s to stop on SIGTERM)
        proc.wait(timeout=10)


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
def test_a_public_azure_container_reads_unsigned(azurite, rich_nc):
    with ncz.open("az://pub/ds", storage_options={"use_emulator": True, "anon": True}) as ds:
        values = ds["v_f8"][...]
    np.testing.assert_array_equal(values, read_source(str(rich_nc)).root.variables["v_f8"].data)


def test_the_clis_read_azure_with_anon_as_the_directory(azurite):
    env, local = azurite
    for args in (["dump"], ["check", "--deep"]):
        want, got = cli(*args, str(local)), cli(*args, "--anon", "az://pub/ds", env=env)
        assert got.returncode == want.returncode, got.stderr
        assert got.stdout.replace("az://pub/ds#anon", str(local)) == want.stdout


def test_a_private_azure_container_refuses_anonymous_reads_in_one_line(azurite):
    env, _ = azurite
    with pytest.raises(StoreError, match=r"az://priv/ds: access denied \(HTTP 403") as err:
        ncz.open("az://priv/ds", storage_options={"use_emulator": True, "anon": True})
    assert "\n" not in str(err.value)
    done = cli("dump", "-h", "--anon", "az://priv/ds", env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "HTTP 403" in done.stderr, done.stderr


# ---- an unsigned S3 reader pins the dataset it opened, as a signed one does (stores/s3_generation.py) -------------

@pytest.fixture
def public_store(s3_bucket, tmp_path):
    """A bucket readable unsigned, holding the old dataset of tests/test_reader_generation.py; (url, old, new)."""
    import boto3

    from tests.test_reader_generation import make_nc

    old, new = make_nc(tmp_path / "old.nc", 0.0), make_nc(tmp_path / "new.nc", 1000.0)
    boto3.client("s3").put_bucket_policy(Bucket=s3_bucket, Policy=_policy(s3_bucket))
    signed = f"s3://{s3_bucket}/store#mode=nczarr,s3"
    ncz.convert(str(old), signed)
    return signed, old, new


@pytest.mark.s3
def test_an_unsigned_s3_reader_opened_before_an_overwrite_never_reads_the_new_chunks(public_store):
    import time

    from tests.test_reader_generation import N_TIME, convert, expected, read_or_refuse

    signed, _, new = public_store
    time.sleep(1.1)  # S3's Last-Modified has one-second resolution: the open is after the old write
    with ncz.open(signed + "&aws.profile=no") as ds:
        assert type(ds.store).__name__ == "RemoteStore"
        np.testing.assert_array_equal(np.asarray(ds["v"][0:4]), expected(0.0)[0:4])
        convert(new, signed)
        assert read_or_refuse(ds, slice(4, N_TIME)) is None, "every chunk was rewritten: the old dataset is gone"


@pytest.mark.s3
def test_an_unsigned_s3_reader_reads_chunks_older_than_its_root_without_asking(public_store, faulty, s3_bucket):
    """obstore gives no server clock (``Date``): the pinned root's own Last-Modified stands in, so a chunk
    written in an earlier second than the root is read with its GET alone, no HEAD of the root each."""
    import time

    import boto3

    from tests.test_reader_generation import N_TIME, expected

    signed, _, _ = public_store
    time.sleep(1.1)  # the root metadata rewritten (same bytes) a second after the chunks: as a slow writer leaves it
    client = boto3.client("s3")
    for key in ("store/.zattrs", "store/.zgroup", "store/.zmetadata"):
        body = client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
        client.put_object(Bucket=s3_bucket, Key=key, Body=body)
    with ncz.open(signed + "&aws.profile=no") as ds:
        opened = len(faulty.requests())
        np.testing.assert_array_equal(np.asarray(ds["v"][:]), expected(0.0))
        after = faulty.requests()[opened:]
    assert [method for method, *_ in after] == ["GET"] * (N_TIME // 4), after


@pytest.mark.s3
def test_a_chunk_written_in_the_root_s_own_second_makes_the_reader_ask_the_root_again(public_store, faulty,
                                                                                        s3_bucket):
    """The complement of the test above: a chunk whose Last-Modified equals the pinned clock to the second may
    be a writer's who replaced the dataset within that second, so the reader HEADs the pinned root once
    before trusting it (stores/s3_generation.py: only an *earlier* second is proof)."""
    import time

    import boto3

    from tests.test_reader_generation import N_TIME, expected

    signed, _, _ = public_store
    client = boto3.client("s3")
    time.sleep(1.1)  # every other chunk in an earlier second than the root rewritten below
    rewrite = ("store/.zattrs", "store/.zgroup", "store/.zmetadata", "store/v/0.0")
    bodies = {key: client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() for key in rewrite}
    for _ in range(5):  # the puts straddle a second now and then: then again, until they share one
        for key in rewrite:
            client.put_object(Bucket=s3_bucket, Key=key, Body=bodies[key])
        stamps = {client.head_object(Bucket=s3_bucket, Key=k)["LastModified"] for k in (rewrite[2], rewrite[3])}
        if len(stamps) == 1:
            break
    assert len(stamps) == 1, stamps  # the precondition: the chunk and the pinned root share their second
    with ncz.open(signed + "&aws.profile=no") as ds:
        opened = len(faulty.requests())
        np.testing.assert_array_equal(np.asarray(ds["v"][:]), expected(0.0))
        after = faulty.requests()[opened:]
    assert sorted(method for method, *_ in after) == ["GET"] * (N_TIME // 4) + ["HEAD"], after
    assert [key for method, key, *_ in after if method == "HEAD"] == [f"{s3_bucket}/store/.zmetadata"], after


@pytest.mark.s3
def test_a_worker_reopens_an_unsigned_store_with_the_options_it_was_opened_with(buckets, rich_nc, monkeypatch,
                                                                                tmp_path):
    """A dask worker opens the store again from ``reopen_args()``: with ``storage_options={"anon": True}``
    that must again be the unsigned reader, which reads with no credentials anywhere (a signed reopen
    would fail there)."""
    from nczarr_conformance.stores import reopen

    with ncz.open(f"s3://{buckets['public']}/ds", storage_options={"anon": True}) as ds:
        args = ds.reopen_args()
        want = ds["v_f8"][...]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    store = reopen(*args)
    try:
        assert type(store).__name__ == "RemoteStore"
        assert store.get("/v_f8/.zarray") is not None
    finally:
        store.close()
    source = read_source(str(rich_nc))
    np.testing.assert_array_equal(want, source.root.variables["v_f8"].data)


# ---- no dataset at an HTTP URL: the status, the zip, what was looked for --------------------------------------------

def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr.rstrip("\n")


def test_an_http_404_for_the_url_is_said_as_such(web):
    """Nothing served at the URL: every command says the server's 404 for it, not "neither /.zgroup nor …"."""
    url = f"{web.url}/nothere"
    line = _one_line(cli("dump", url))
    assert line == f"nczarr-dump: {url}: no dataset here: HTTP 404 Not Found at this URL"
    assert [(m, p) for m, p, _ in web.log if p == "/nothere"] == [("HEAD", "/nothere")]  # the server's own answer
    check = cli("check", url)
    assert check.returncode == 1 and "no dataset at this URL: HTTP 404 Not Found at this URL" in check.stdout


def test_a_served_directory_without_a_dataset_names_v2_and_v3_root_objects(web, served):
    (served.root / "empty").mkdir(exist_ok=True)
    line = _one_line(cli("dump", f"{web.url}/empty"))
    assert line.endswith(": no dataset here: /.zgroup, /.zarray (Zarr v2) and /zarr.json (Zarr v3) each answered "
                         "HTTP 404 Not Found"), line
    assert {p for _, p in (e[:2] for e in web.log)} >= {"/empty/.zgroup", "/empty/.zarray", "/empty/zarr.json"}


@pytest.mark.parametrize("name", ["rich.zip", "rich-zip-without-its-ending"])
def test_a_zip_served_over_http_is_named_a_zip(web, served, rich_nc, name):
    """A zip store's file on a web server (by its first bytes, whatever its name) is said to be what it is."""
    path = served.root / name
    ncz.convert(str(rich_nc), str(served.root / "rich.zip"))
    if name != "rich.zip":
        os.replace(served.root / "rich.zip", path)
    try:
        assert path.read_bytes()[:4] == b"PK\x03\x04"
        for tool in ("dump", "fix"):
            line = _one_line(cli(tool, *(["--dry-run"] if tool == "fix" else []), f"{web.url}/{name}"))
            assert f"{web.url}/{name}: no dataset here: a zip file served over HTTP, not a store" in line, line
    finally:
        path.unlink()


# ---- a server that stalls: signals end the read, a timeout the user sets bounds it (issue 39, defect 1) -------------

class Stall:
    """A TCP server on 127.0.0.1 that reads each request and never answers; ``asked`` is set at the first one."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.asked = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            conn.settimeout(10)
            try:
                if conn.recv(4096):
                    self.asked.set()
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def stall():
    server = Stall()
    yield server
    server.close()


@pytest.mark.parametrize(("signum", "code", "said"), [(2, 130, "interrupted"), (15, 143, "terminated by SIGTERM")])
def test_a_signal_ends_a_read_from_a_stalled_server_with_its_one_line(stall, signum, code, said):
    """obstore blocks in Rust, where Python runs no handler: the signal waited for the request's 5-minute
    timeout. Now the command ends at once with docs/guarantees.md's exit code and line."""
    proc = subprocess.Popen([sys.executable, "-m", "nczarr_conformance.cli.dump", f"{stall.url}/ds"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stall.asked.wait(60), "the command never sent its request"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)  # a bound for the failure only: the default timeout is 300 s
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err) == (code, f"nczarr-dump: {said}\n")


def test_a_stalled_read_times_out_at_the_bound_set_in_the_environment(stall):
    done = cli("dump", f"{stall.url}/ds", env={"NCZARR_REMOTE_TIMEOUT": "0.3"})
    line = _one_line(done)
    assert line == (f"nczarr-dump: {stall.url}/ds: no complete answer within 0.3 s (NCZARR_REMOTE_TIMEOUT) while "
                    "trying to get /.zmetadata"), line


def test_a_stalled_read_times_out_at_the_storage_option_and_a_bad_one_is_refused(stall, monkeypatch):
    monkeypatch.setenv("NCZARR_REMOTE_TIMEOUT", "600")  # the storage option wins over the environment
    with pytest.raises(StoreUnavailableError, match=r"no complete answer within 0\.3 s \(storage option timeout\)"):
        ncz.open(f"{stall.url}/ds", storage_options={"timeout": 0.3})
    for bad in ("soon", 0, -1):
        with pytest.raises(UsageError, match=f"timeout must be a positive number of seconds, not {bad!r}"):
            ncz.open(f"{stall.url}/ds", storage_options={"timeout": bad})


def _interrupted_once_waiting(cmd: list[str], waiting: threading.Event,
                              env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str, str]:
    """``cmd`` run, sent SIGINT once the server sees it waiting (``waiting``), and its (process, stdout, stderr)
    within 20 s: a bound for the failure only, the stall lasts for minutes (the default timeout is 300 s)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert waiting.wait(60), f"{cmd[1:3]} never sent its request"
        proc.send_signal(2)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    return proc, out, err


@pytest.mark.parametrize("command", ["check", "convert"])
def test_sigint_ends_nczarr_check_and_nc2nczarr_waiting_on_a_stalled_server(stall, rich_nc, tmp_path, command):
    """Beyond nczarr-dump: nczarr-check reading a stalled HTTP store, and nc2nczarr writing to S3 at a stalled
    endpoint (opening a store for writing is a critical section: its listing held Ctrl-C for botocore's
    timeouts and retries, minutes). Both end at once: exit 130, docs/guarantees.md's one line."""
    tool = {"check": "nczarr-check", "convert": "nc2nczarr"}[command]
    args = [f"{stall.url}/ds"] if command == "check" else [str(rich_nc), "s3://bucket/out.file"]
    env = {**os.environ, "AWS_ENDPOINT_URL": stall.url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1"}
    proc, _, err = _interrupted_once_waiting([sys.executable, "-m", f"nczarr_conformance.cli.{command}", *args],
                                             stall.asked, env=env)
    assert (proc.returncode, err) == (130, f"{tool}: interrupted\n")


@pytest.mark.parametrize("how", ["api", "xarray"])
def test_ctrl_c_ends_a_python_read_from_a_stalled_server(stall, how):
    """issue 39: the Python API and the xarray engine, not only the commands: Ctrl-C in a script or a notebook
    raises KeyboardInterrupt within seconds, not at the request's 5-minute timeout."""
    call = (f"import nczarr_conformance as ncz; ncz.open({stall.url + '/ds'!r})" if how == "api" else
            f"import xarray as xr; xr.open_dataset({stall.url + '/ds'!r}, engine='nczarr')")
    script = f"try:\n    {call}\nexcept KeyboardInterrupt:\n    print('interrupted')\n"
    proc, out, err = _interrupted_once_waiting([sys.executable, "-c", script], stall.asked)
    assert (proc.returncode, out) == (0, "interrupted\n"), err


def test_sigint_ends_nczarr_check_deep_whose_chunk_readers_wait_on_a_stalled_server(web):
    """Issue 39 (1), ``nczarr-check --deep``: the chunks are read by a pool of threads, where Python runs no
    signal handler; each waiting read looks at the recorded signal, so the pool stops and the command ends with
    docs/guarantees.md's line instead of waiting out the request's timeout (its exit joins the pool)."""
    store = web.root / "rich.file"
    chunks = [p for p in store.rglob("*") if p.is_file() and re.fullmatch(r"\d+(\.\d+)*", p.name)]
    assert len(chunks) > 2  # a pool of readers, not one read in the main thread
    web.stall = r"/\d+(\.\d+)*$"  # the metadata is answered, every chunk held
    proc, _, err = _interrupted_once_waiting(
        [sys.executable, "-m", "nczarr_conformance.cli.check", "--deep", f"{web.url}/rich.file"], web.stalled)
    assert (proc.returncode, err) == (130, "nczarr-check: interrupted\n")
