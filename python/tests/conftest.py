"""Shared fixtures of the Python tests: the data folder (WEFT_DATA_DIR, else ../shared/data next
to the clone) and the weft command-line tool (WEFT_CLI, set by ctest)."""

import os
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="NumPy is absent (Debian: python3-numpy)")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def data_dir():
    return Path(os.environ.get("WEFT_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def weft_cli():
    cli = os.environ.get("WEFT_CLI")
    if not cli or not Path(cli).exists():
        pytest.skip("the weft tool is unknown (run through ctest, or set WEFT_CLI)")
    return cli
