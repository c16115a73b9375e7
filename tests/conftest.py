"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import pytest

# --- require_binary: external tools needed by a test -------------------------
# A missing tool skips the test on a developer machine, but under CI=true it is
# a failure: CI installs these tools, and a skip there would hide a broken check.


def _require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name!r} is not on PATH"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true requires it", pytrace=False)
    pytest.skip(f"{reason}; install it to run this test")


@pytest.fixture
def require_binary() -> Callable[[str], str]:
    """Return a function that gives the path of a tool or skips/fails the test."""
    return _require_binary


# --- end require_binary -------------------------------------------------------
