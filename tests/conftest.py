"""Test tiers: ``slow`` marks the tests that start processes (gloo ranks, torchrun, a live
service, schemathesis); ``make test-fast`` runs the rest for the edit loop, ``make test`` all."""

from pathlib import Path

import pytest

SLOW_DIRS = {"api"}
SLOW_MODULES = {"test_probe.py"}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts processes or a live service (not in "
                                       "make test-fast)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.parent.name in SLOW_DIRS or path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
