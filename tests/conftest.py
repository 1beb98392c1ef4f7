from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nczarr_conformance.testing.samples import small_model, write_rich_nc

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus"


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=40, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("deep", max_examples=2000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def rich_nc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rich") / "rich.nc"
    write_rich_nc(str(path))
    return path


@pytest.fixture
def small():
    return small_model()


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (apt-get install -y netcdf-bin)")
    return path
