from __future__ import annotations

import compileall
import importlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NoReturn, TypeVar

import pytest

from nczarr_conformance.resources import netcdf_c_corpus
from nczarr_conformance.testing.samples import small_model, write_rich_nc

#: the files the last run spent longest on go to the xdist workers first (--dist loadfile): tests/longest_first.py
pytest_plugins = ["tests.longest_first"]

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus"
#: netcdf-c's reference files ship inside the package (the matrix reads them when installed)
NETCDF_C_CORPUS = netcdf_c_corpus()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and is_checkout():  # once, in the process that starts the xdist workers
        compile_package()
    from hypothesis import HealthCheck, Phase, settings

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
    # ci: fixed draws (a red CI run reproduces), enough of them to reach the corners
    settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True, suppress_health_check=quiet)
    # nightly: fresh draws every run, five times as many (HYPOTHESIS_PROFILE=nightly)
    settings.register_profile("nightly", max_examples=500, deadline=None, derandomize=False,
                              suppress_health_check=quiet)
    settings.register_profile("deep", max_examples=2000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.function_scoped_fixture])
    settings.register_profile("debug", max_examples=200, deadline=None, phases=[Phase.explicit, Phase.reuse,
                              Phase.generate, Phase.target],
                              suppress_health_check=list(HealthCheck))
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def compile_package() -> None:
    """The package's bytecode, fresh, as pip install writes it (benchmarks/run.py does the same).

    The suite starts our commands thousands of times; under PYTHONDONTWRITEBYTECODE (set in some
    environments, this sandbox's among them) a checkout whose __pycache__ is missing or stale compiles every
    module it imports from source in each of them: ~150 ms of CPU per ``nczarr-check`` of a small store,
    as much as the check itself. Only modules whose source changed are compiled again (the timestamps say).
    """
    compileall.compile_dir(str(REPO / "nczarr_conformance"), quiet=1)


def is_checkout() -> bool:
    """Whether the tests run from a git checkout, not from scripts/mutants' or scripts/mutation's copy of its
    tracked files: a copy rewrites a source file and runs tests within a second or so, where a bytecode file
    checked by timestamp and size could be taken for a mutant of the same size, so there Python compiles
    every source (their PYTHONDONTWRITEBYTECODE=1), as it did before this package was compiled here."""
    return (REPO / ".git").exists()


@pytest.fixture(scope="session")
def rich_nc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rich") / "rich.nc"
    write_rich_nc(str(path))
    return path


@pytest.fixture
def small():
    return small_model()


#: the Debian package that provides each command a test runs (scripts/test installs them)
TOOL_PACKAGES = {"ncgen": "netcdf-bin", "ncdump": "netcdf-bin", "nccopy": "netcdf-bin",
                 "gdalmdiminfo": "gdal-bin", "gdalinfo": "gdal-bin", "zstd": "zstd"}


def in_ci() -> bool:
    """``CI=true`` (set by .ci/run and by every hosted CI): the run must prove everything it claims."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_peer(reason: str) -> NoReturn:
    """The one way a test reacts to an absent peer tool, binary or module.

    Locally it skips with the reason (the -ra summary names it). Under ``CI=true`` it fails
    naming it: a skip there would let a green run stand for tests that never ran (a strict
    xfail that skips proves nothing either).
    """
    if in_ci():
        pytest.fail(f"{reason}: under CI=true a missing peer is a failure, not a skip", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_tool(name: str) -> str:
    """The path of the command ``name``; skips (fails under CI=true) when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        package = TOOL_PACKAGES.get(name)
        missing_peer(f"command {name} not on PATH" + (f" (apt-get install -y {package})" if package else ""))
    return path


def require_module(name: str) -> ModuleType:
    """The imported module ``name``; skips (fails under CI=true) when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing_peer(f"Python module {name} cannot be imported ({exc}; pip install -e '.[test]')")


_T = TypeVar("_T")


def settled(look: Callable[[], _T], *, quiet: float = 0.5, limit: float = 20.0) -> _T:
    """What ``look()`` returns once it has stopped changing for ``quiet`` seconds.

    A SIGKILLed S3 client can leave requests behind it: a PUT whose body reached the server before the
    kill is still stored by one of moto's request threads after the client's process is gone (as real
    S3 stores it). A snapshot taken the moment ``wait()`` returns may miss that object, and a later
    comparison then blames the next command for it. Raises when the objects keep changing past ``limit``.
    """
    deadline = time.monotonic() + limit
    last = look()
    while True:
        time.sleep(quiet)
        now = look()
        if now == last:
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"still changing after {limit} s")
        last = now


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_server():
    """A real S3 endpoint: moto's threaded server on 127.0.0.1 and a free port, spoken to over HTTP."""
    require_module("boto3")
    server_mod = require_module("moto.server")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                            "AWS_ENDPOINT_URL", "AWS_PROFILE")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_bucket(moto_server, request):
    """A fresh bucket on the moto server; its name."""
    import re

    import boto3

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + f"-{os.getpid() % 10000}"
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return name

