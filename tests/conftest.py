"""Test-wide set-up: the runtime's fixture experiment is registered through REPDYN_PLUGINS, as a user's would be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# One torch thread per test process; pytest-xdist runs two processes (addopts in pyproject.toml). The tests are
# thousands of tiny ops, where a second intra-op thread only spins: measured 119 s vs 13 s of CPU for the
# seed-000 experiment tests on a loaded 2-core machine. Subprocesses inherit it through OMP_NUM_THREADS.
torch.set_num_threads(1)
os.environ["OMP_NUM_THREADS"] = "1"

FIXTURES = Path(__file__).parent / "runtime"
os.environ["REPDYN_PLUGINS"] = "fixture_experiments,fixture_recorded"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(FIXTURES))
sys.path.insert(0, str(Path(__file__).parent))  # tests/report_browser.py, imported by tests


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for running the ``repdyn`` command in a subprocess."""
    return {**os.environ, "COLUMNS": "200"}


@pytest.fixture
def paper_gpu(tmp_path):
    """``paper_gpu(*experiments, piece=60, limit=None, calls=1)`` runs docs/reproduction/scripts/paper_gpu.sh at the
    smoke scale on the CPU (checkpoints every 0.6 s) into ``tmp_path/store`` and ``tmp_path/results``, with a piece
    of ``piece`` seconds and a results size limit of ``limit`` bytes (the script's 16 MiB if None), calling it again
    while a piece runs out (status 3), at most ``calls`` times; returns the last call."""
    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "REPDYN_PLUGINS"}  # the tests' fixture papers
    env.update(REPDYN=f"{sys.executable} -m repdyn", PYTHONPATH=str(root / "src"), SCALE="smoke", DEVICE="cpu",
               CHECKPOINT="0.01")

    def run(*experiments: str, piece: int = 60, limit: int | None = None,
            calls: int = 1) -> subprocess.CompletedProcess:
        sized = {"RESULTS_LIMIT": str(limit)} if limit is not None else {}
        for _ in range(calls):
            done = subprocess.run(["bash", str(root / "docs/reproduction/scripts/paper_gpu.sh"),
                                   str(tmp_path / "store"), str(tmp_path / "results"), *experiments],
                                  env={**env, "PIECE": str(piece), **sized}, capture_output=True, text=True)
            if done.returncode != 3:
                break
        return done

    return run


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


@pytest.fixture(autouse=True)
def no_global_torch_state_leaks():
    """A test that changes torch's default dtype must restore it (DESIGN.md: no global state)."""
    dtype = torch.get_default_dtype()
    yield
    assert torch.get_default_dtype() == dtype, "this test changed torch's default dtype and did not restore it"
