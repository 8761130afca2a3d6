"""The result store under damage and concurrent use, on real stores: corrupted runs are quarantined and recomputed,
two reproductions on one folder compute each run once, a full disk leaves nothing that is read as a result."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_reproduce import FIXTURE, repdyn, stored  # tests/runtime is on sys.path (conftest.py)

from repdyn.framework.config import ConfigError
from repdyn.runtime.reproduce import analyse, execute, plan, tasks_for
from repdyn.runtime.store import QUARANTINE, CorruptRun, ResultStore, Verification
from repdyn.runtime.tasks import TaskFailed

LRS = "lrs=0.1,0.2,0.3,0.4"


def arrays(path: Path) -> dict[str, bytes]:
    """A stored run's result arrays as bytes (not its metadata, which records pid and timing)."""
    with np.load(path) as data:
        return {name: data[name].tobytes() for name in data.files if name != "__meta__"}


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def alter_one_array(path: Path) -> None:
    """Rewrite the file as a valid zip with the same metadata and one number changed (what bit rot or an edit
    inside a valid archive leaves: every zip CRC is right, only the checksum can tell)."""
    with np.load(path) as data:
        content = {name: data[name] for name in data.files}
    content["w"] = content["w"].copy()
    content["w"][0] += 1e-3
    with open(path, "wb") as handle:
        np.savez(handle, **content)
    with np.load(path) as data:  # still a readable archive
        assert data["w"][0] == content["w"][0]


def traced(env: dict[str, str], trace: Path) -> dict[str, str]:
    return {**env, "REPDYN_FIXTURE_TRACE": str(trace)}


def computed(trace: Path) -> list[str]:
    return sorted(line.split()[0] for line in trace.read_text().splitlines()) if trace.exists() else []


@pytest.mark.parametrize("damage", [truncate, garbage, alter_one_array])
def test_a_damaged_run_is_quarantined_and_recomputed_and_the_reproduction_goes_on(tmp_path, cli_env, damage):
    out, trace = tmp_path / "out", tmp_path / "trace"
    args = ["run", FIXTURE, "--out", str(out), "--json"]
    assert repdyn(*args, env=cli_env).returncode == 0
    before = {p.name: arrays(p) for p in stored(out)}
    victim = stored(out)[0]
    damage(victim)
    again = repdyn(*args, env=traced(cli_env, trace))
    assert again.returncode == 0, again.stderr
    warnings = [line for line in again.stderr.splitlines() if "quarantined" in line]
    assert len(warnings) == 1 and str(victim) in warnings[0] and "Traceback" not in again.stderr
    quarantined = out / "runs" / QUARANTINE / FIXTURE / victim.name
    assert quarantined.is_file() and str(quarantined) in warnings[0]
    assert len(computed(trace)) == 1  # only the damaged run is recomputed
    assert {p.name: arrays(p) for p in stored(out)} == before  # bit for bit what was there before the damage
    summary = json.loads(again.stdout)
    assert summary["verdicts"]["reproduced"] == summary["total"] == 2 and (out / "index.html").is_file()


def test_a_run_damaged_or_removed_after_execute_is_recomputed_before_analysis(tmp_path, caplog):
    plan_ = plan([FIXTURE], overrides={"lrs": "0.1,0.2,0.3"}, out=tmp_path / "out")
    execute(plan_)
    store, (first, second, _) = plan_.store, tasks_for(plan_)
    reference = {t.key: arrays(store.path(t.experiment, t.key)) for t in tasks_for(plan_)}
    truncate(store.path(first.experiment, first.key))
    store.path(second.experiment, second.key).unlink()  # removed between planning and analysis
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        outcomes = analyse(plan_)
    assert all(claim.verdict == "reproduced" for claim in outcomes[0].claims)
    assert {t.key: arrays(store.path(t.experiment, t.key)) for t in tasks_for(plan_)} == reference
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "quarantined" in messages[0] and first.key in messages[0]
    assert "is missing; recomputing it" in messages[1] and second.key in messages[1]


def test_report_does_not_recompute_a_damaged_run_but_names_it(tmp_path, cli_env):
    out = tmp_path / "out"
    assert repdyn("run", FIXTURE, "--out", str(out), env=cli_env).returncode == 0
    garbage(stored(out)[1])
    done = repdyn("report", str(out), env=cli_env)
    assert done.returncode == 2
    assert "quarantined" in done.stderr and "has no stored result" in done.stderr and "Traceback" not in done.stderr
    assert len(stored(out)) == 1
    plan_ = plan([FIXTURE], out=out)
    with pytest.raises(ConfigError, match="run 'lr=0.2' has no stored result"):
        analyse(plan_, recompute=False)


def test_verify_quarantines_what_is_damaged_and_reports_it(tmp_path, cli_env):
    out = tmp_path / "out"
    assert repdyn("run", FIXTURE, "--set", LRS, "--out", str(out), env=cli_env).returncode == 0
    files = stored(out)
    truncate(files[0])
    alter_one_array(files[2])
    done = repdyn("verify", str(out), env=cli_env)
    assert done.returncode == 1, done.stderr
    assert f"4 stored runs in {out / 'runs'}: 2 intact, 2 quarantined" in done.stdout
    moved = {out / "runs" / QUARANTINE / FIXTURE / files[i].name for i in (0, 2)}
    assert {Path(line.split()[-1]) for line in done.stdout.splitlines()[1:]} == moved
    assert all(path.is_file() for path in moved) and stored(out) == [files[1], files[3]]
    clean = repdyn("verify", str(out / "runs"), env=cli_env)
    assert clean.returncode == 0 and "2 stored runs" in clean.stdout and "2 intact, 0 quarantined" in clean.stdout
    missing = repdyn("verify", str(tmp_path / "nothing"), env=cli_env)
    assert missing.returncode == 2 and "no stored runs here" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_two_reproductions_on_one_folder_compute_each_run_once_and_agree(tmp_path, cli_env):
    out, trace = tmp_path / "out", tmp_path / "trace"
    args = [sys.executable, "-m", "repdyn", "reproduce", "--only", "fixture.least_squares,fixture.tanh_regression",
            "--out", str(out), "--json"]
    env = {**traced(cli_env, trace), "REPDYN_FIXTURE_DELAY": "0.4"}
    processes = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    results = [process.communicate(timeout=600) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err for _, err in results]
    labels = ["lr=0.1", "lr=0.2"] + [f"run={i}" for i in range(4)]  # the two fixture experiments' six runs
    assert computed(trace) == sorted(labels)  # each run computed once, by one of the two
    first, second = (json.loads(stdout) for stdout, _ in results)
    assert first["claims"] == second["claims"] and first["verdicts"]["reproduced"] == first["total"] == 3
    report = json.loads((out / "claims.json").read_text())
    assert {(c["experiment"], c["id"], c["verdict"]) for c in report["claims"]} == {
        (c["experiment"], c["id"], c["verdict"]) for c in first["claims"]}
    assert len(list((out / "runs").glob("fixture.*/*.npz"))) == 6 and not list((out / "runs").glob("*/.tmp-*"))
    assert ResultStore(out / "runs", keyed=True).verify() == Verification(runs=6)


def test_a_full_disk_leaves_no_partial_run_and_names_the_folder(tmp_path, monkeypatch):
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    real_savez = np.savez

    def disk_full(handle, **arrays):
        handle.write(b"PK\x03\x04 the first bytes of a zip")
        handle.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", disk_full)
    folder = plan_.store.root / FIXTURE
    with pytest.raises(TaskFailed, match=f"in the folder {folder}: No space left on device"):
        execute(plan_)
    assert list(folder.iterdir()) == []  # no partial file, not even a temporary one
    monkeypatch.setattr(np, "savez", real_savez)
    execute(plan_)
    assert all(claim.verdict == "reproduced" for claim in analyse(plan_)[0].claims)


def test_write_bytes_refuses_a_damaged_file(tmp_path):
    store = ResultStore(tmp_path)
    path = store.write("e", "k", {"a": np.arange(4.0)}, {"status": "ok"})
    data = path.read_bytes()
    with pytest.raises(CorruptRun, match="is corrupt"):
        store.write_bytes("e", "other", data[:-10])
    assert not store.has("e", "other")
    store.write_bytes("e", "copy", data)
    np.testing.assert_array_equal(store.read("e", "copy").result["a"], np.arange(4.0))
