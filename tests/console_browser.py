"""A real browser for the console's tests: Debian's chromium driven by
Playwright through its executable (Playwright's own browser download is
never used). Missing chromium skips a test here and fails it under CI=true,
as a missing promtool does."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    found = shutil.which("chromium")
    if found:
        return found
    reason = "Debian's chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true requires it", pytrace=False)
    pytest.skip(reason)


def artifacts_dir(factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: ``$TEST_ARTIFACTS_DIR/console`` when set, else pytest's tmp."""
    chosen = os.environ.get("TEST_ARTIFACTS_DIR")
    if chosen:
        path = Path(chosen) / "console"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return factory.mktemp("console-screenshots")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="enact-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, args=ARGS, headless=True,
            viewport={"width": 1280, "height": 860})
        try:
            yield context
        finally:
            context.close()
