"""Shared setup of the Python tests: the repository root, and one junit file
per MPI rank (--junitxml=...{rank}...) so that every rank's results count."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config):
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    if getattr(config.option, "xmlpath", None):
        config.option.xmlpath = config.option.xmlpath.replace("{rank}", rank)


@pytest.fixture(scope="session")
def root():
    return ROOT
