"""Port of the S3 URL table of netcdf-c ``unit_test/test_ncuri.c`` (``S3TESTS``).

netcdf-c parses each URL and rebuilds it in path style (``NC_s3urlrebuild``):
``https://<host>/<bucket>/<key>#mode=s3…``. The table is read from the copied C file; each row's
rebuilt URL is split into (endpoint host, bucket, key, modes) and compared with what
``nczarr_conformance.urls.parse`` makes of the input. Ours names AWS's default endpoint without
a region (``None`` for ``s3://``, ``s3.amazonaws.com``); netcdf-c writes the default region
(``us-east-1`` when no AWS configuration says otherwise, which is how its table is written): the
comparison maps the first to the second, nothing else.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from nczarr_conformance.urls import parse
from tests.netcdf_c.harness import NETCDF_C, require


def s3_table() -> list[tuple[str, str]]:
    text = require(NETCDF_C / "unit_test" / "test_ncuri.c").read_text()
    block = text[text.index("static Test S3TESTS[]"):]
    block = block[:block.index("{NULL,NULL}")]
    rows = re.findall(r'^\s*\{\s*"([^"]+)"\s*,\s*"([^"]+)"\s*\}', block, flags=re.M)
    assert len(rows) == 14, rows
    return rows


def netcdf_c_view(rebuilt: str) -> tuple[str, str, str, tuple[str, ...]]:
    parts = urlsplit(rebuilt)
    bucket, _, key = parts.path.strip("/").partition("/")
    modes = tuple(m for m in parts.fragment.removeprefix("mode=").split(",") if m and m != "s3")
    return parts.netloc, bucket, key, modes


def our_view(url: str) -> tuple[str, str, str, tuple[str, ...]]:
    spec = parse(url)
    assert spec.kind == "s3"
    host = urlsplit(spec.endpoint).netloc if spec.endpoint else "s3.amazonaws.com"
    if host == "s3.amazonaws.com":
        host = f"s3.{spec.params.get('aws.region', 'us-east-1')}.amazonaws.com"
    bucket, _, key = spec.path.partition("/")
    return host, bucket, key, tuple(m for m in spec.modes if m != "s3")


@pytest.mark.parametrize(("url", "rebuilt"), s3_table())
def test_s3_url(url, rebuilt):
    """test_ncuri.c S3TESTS row: ours finds the bucket, key and endpoint netcdf-c finds."""
    assert our_view(url) == netcdf_c_view(rebuilt)
