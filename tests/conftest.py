"""Test-wide set-up: the runtime's fixture experiment is registered through REPDYN_PLUGINS, as a user's would be."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "runtime"
os.environ["REPDYN_PLUGINS"] = "fixture_experiments"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(Path(__file__).parent))  # tests/report_browser.py, imported by tests


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for running the ``repdyn`` command in a subprocess."""
    return {**os.environ, "COLUMNS": "200"}


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium through selenium (Debian's chromium + chromium-driver). Skipped where they are missing,
    except under CI=true, where a missing browser fails the test."""
    import shutil

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        message = "headless Chromium is missing: install it with `apt-get install chromium chromium-driver`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1280,2000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()
