"""Dask execution through the ``repdyn`` command: a LocalCluster of 2 workers stores bit for bit what the local
executor stores, and a sweep whose worker is SIGKILLed mid-run still completes without losing a run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from repdyn.runtime.cluster import parse_cluster, run_on_worker, store_id
from repdyn.runtime.reproduce import execute, plan, tasks_for
from repdyn.runtime.store import ResultStore

pytest.importorskip("dask.distributed")

EXPERIMENT, RUNS = "fixture.tanh_regression", 6  # threaded float32 torch: thread counts must not change results


def repdyn(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repdyn", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def stored_by_label(out: Path) -> dict[tuple[str, str], tuple[dict[str, np.ndarray], dict]]:
    """(experiment, run label) -> (arrays, meta) of every stored run under ``out/runs``."""
    runs = {}
    for path in sorted(p for p in (out / "runs").glob("*/*.npz") if not p.name.startswith(".tmp-")):
        with np.load(path) as data:
            meta = json.loads(str(data["__meta__"]))
            runs[meta["experiment"], meta["label"]] = ({k: data[k] for k in data.files if k != "__meta__"}, meta)
    return runs


def assert_bit_identical(runs: dict, reference: dict) -> None:
    assert runs.keys() == reference.keys()
    for name, (arrays, meta) in runs.items():
        expected = reference[name][0]
        assert meta["status"] == "ok" and arrays.keys() == expected.keys(), name
        for key, array in arrays.items():
            assert array.dtype == expected[key].dtype and array.tobytes() == expected[key].tobytes(), (name, key)


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory) -> dict:
    """The tanh fixture's 6 runs by the local executor (in this process, one job)."""
    plan_ = plan([EXPERIMENT], overrides={"runs": str(RUNS)}, out=tmp_path_factory.mktemp("local"))
    execute(plan_, jobs=1)
    runs = stored_by_label(plan_.out)
    assert len(runs) == RUNS
    return runs


def test_local_cluster_with_a_killed_worker_stores_what_the_local_executor_stores(tmp_path, cli_env,
                                                                                  local_reference):
    marker, out = tmp_path / "killed-once", tmp_path / "dask"
    done = repdyn("run", EXPERIMENT, "--set", f"runs={RUNS}", "--set", f"kill_marker={marker}",
                  "--cluster", "local:2", "--out", str(out), "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdicts"]["reproduced"] == 1
    killed_pid = int(marker.read_text())  # the first attempt of run=1 wrote its pid here, then SIGKILLed itself
    runs = stored_by_label(out)
    assert_bit_identical(runs, local_reference)
    pids = {meta["pid"] for _, meta in runs.values()}
    assert runs[EXPERIMENT, "run=1"][1]["pid"] != killed_pid and os.getpid() not in pids
    assert not list((out / "runs").glob("*/.tmp-*"))


def test_worker_without_the_shared_store_sends_its_result_back(tmp_path, monkeypatch, local_reference):
    """A worker that cannot see the store runs against a private one; the client writes the returned file."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "worker-tmp"))
    (tmp_path / "worker-tmp").mkdir()
    plan_ = plan([EXPERIMENT], overrides={"runs": str(RUNS)}, out=tmp_path / "client")
    store, identity = ResultStore(plan_.out / "runs"), store_id(plan_.out / "runs")
    assert store_id(plan_.out / "runs") == identity
    for task in tasks_for(plan_):
        status, data, _ = run_on_worker(task, "another-file-system")
        assert status == "ok" and data is not None and not store.has(task.experiment, task.key)
        store.write_bytes(task.experiment, task.key, data)
    assert_bit_identical(stored_by_label(plan_.out), local_reference)
    task = tasks_for(plan_)[0]
    assert run_on_worker(task, identity) == ("cached", None, "")


def test_failed_run_comes_back_as_a_failure_naming_its_error(tmp_path):
    """A run that raises is reported to the client (which raises TaskFailed) instead of being retried by Dask."""
    plan_ = plan([EXPERIMENT], overrides={"kill_marker": str(tmp_path / "no-such-folder" / "marker")},
                 out=tmp_path / "out")
    victim = next(task for task in tasks_for(plan_) if task.label == "run=1")
    status, data, detail = run_on_worker(victim, store_id(plan_.out / "runs"))
    assert (status, data) == ("failed", None) and detail.startswith("FileNotFoundError:") and "no-such-folder" in detail
    assert not ResultStore(plan_.out / "runs").has(victim.experiment, victim.key)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a worker without CUDA")
def test_cuda_run_on_a_worker_without_cuda_names_the_worker(tmp_path):
    plan_ = plan([EXPERIMENT], out=tmp_path / "out")
    task = replace(tasks_for(plan_)[0], device="cuda")
    status, data, detail = run_on_worker(task, store_id(plan_.out / "runs"))
    assert (status, data) == ("failed", None) and "has no CUDA device" in detail


@pytest.mark.parametrize(("address", "message"), [
    ("local:0", "write local:N with N >= 1 workers"),
    ("local:two", "write local:N with N >= 1 workers"),
    ("myhost:8786", "is not a scheduler address (tcp://host:8786) or local:N"),
])
def test_bad_cluster_address_is_named(address, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_cluster(address)
