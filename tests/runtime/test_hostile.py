"""The store and the command as a hostile or unlucky user meets them: no code runs from a results folder, every
stored file (runs, checkpoints, the manifest) is checked against what it claims to be, and bad input exits 2 before
anything is written."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_integrity import arrays, garbage, truncate  # tests/runtime is on sys.path (conftest.py)
from test_reproduce import FIXTURE
from typer.testing import CliRunner

from repdyn.cli import app
from repdyn.nn.checkpoint import HEADER, Checkpointer, write_checkpoint
from repdyn.runtime.atomic import WriteError
from repdyn.runtime.estimate import workers
from repdyn.runtime.preflight import preflight
from repdyn.runtime.reproduce import analyse, execute, plan, tasks_for, write_manifest
from repdyn.runtime.store import QUARANTINE, ResultStore
from repdyn.runtime.tasks import execute_task

LONG = "fixture.long_training"


class Payload:
    """A pickle that runs a shell command when loaded with a plain unpickler."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(result, code: int, message: str) -> None:
    assert result.exit_code == code, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# 1. no code runs from a store

@pytest.mark.parametrize("header", [False, True], ids=["plain torch.save", "with a valid checksum header"])
def test_a_pickle_payload_in_a_checkpoint_executes_nothing_and_is_quarantined(tmp_path, caplog, header):
    plan_ = plan([LONG], overrides={"steps": "30"}, out=tmp_path / "out")
    (task,) = tasks_for(plan_)
    marker, path = tmp_path / "pwned", plan_.store.checkpoint_path(task.folder, task.key)
    path.parent.mkdir(parents=True)
    buffer = io.BytesIO()
    torch.save({"run": task.key, "loops": {0: {"step": Payload(marker)}}}, buffer)
    body = buffer.getvalue()
    path.write_bytes(HEADER + hashlib.sha256(body).hexdigest().encode() + b"\n" + body if header else body)
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        execute(plan_, checkpoint_every=3600.0)
    assert not marker.exists()
    (message,) = warnings_of(caplog)
    moved = plan_.store.root / QUARANTINE / LONG / path.name
    assert f"quarantined checkpoint {path}" in message and str(moved) in message and "starts again" in message
    assert moved.read_bytes()[-len(body):] == body and not path.exists()
    assert plan_.store.verified(LONG, task.key).status == "ok"


def test_a_pickle_in_a_stored_run_executes_nothing_and_is_quarantined(tmp_path, caplog):
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    execute(plan_)
    task = tasks_for(plan_)[0]
    path, marker = plan_.store.path(task.folder, task.key), tmp_path / "pwned"
    with np.load(path) as data:
        meta = data["__meta__"]
    np.savez(path, w=np.array([Payload(marker)], dtype=object), __meta__=meta)
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        outcome, = analyse(plan_)
    assert not marker.exists() and all(claim.verdict == "reproduced" for claim in outcome.claims)
    (message,) = warnings_of(caplog)
    assert f"quarantined stored run {path}" in message and "allow_pickle=False" in message


# 2. a damaged checkpoint

def flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [truncate, garbage, flip_a_bit, "another run's"])
def test_a_damaged_checkpoint_is_quarantined_and_its_run_starts_afresh_bit_identical(tmp_path, caplog, damage):
    reference = plan([FIXTURE], out=tmp_path / "reference")
    execute(reference)
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    first, second = tasks_for(plan_)
    path = plan_.store.checkpoint_path(first.folder, first.key)
    if damage == "another run's":
        write_checkpoint(plan_.store.checkpoint_path(second.folder, second.key), second.key, {0: {"step": 5}})
        os.replace(plan_.store.checkpoint_path(second.folder, second.key), path)
        reason = f"it is the checkpoint of run {second.key!r}"
    else:
        write_checkpoint(path, first.key, {0: {"step": 5, "w": torch.ones(100)}})
        damage(path)
        reason = "damaged" if damage is not flip_a_bit else "does not match its checksum"
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        execute(plan_, checkpoint_every=3600.0)
    (message,) = warnings_of(caplog)
    assert f"quarantined checkpoint {path}" in message and (reason in message or damage is not flip_a_bit)
    assert (plan_.store.root / QUARANTINE / FIXTURE / path.name).is_file() and not path.exists()
    for task in (first, second):
        assert arrays(plan_.store.path(task.folder, task.key)) == arrays(reference.store.path(task.folder, task.key))


# 3. a run under another run's key; verify checks keys and checkpoints

def test_a_run_stored_under_another_runs_key_is_quarantined_and_recomputed(tmp_path, caplog):
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    execute(plan_)
    first, second = (plan_.store.path(t.folder, t.key) for t in tasks_for(plan_))
    expected = arrays(second)
    shutil.copy(first, second)
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        analyse(plan_)
    (message,) = warnings_of(caplog)
    assert f"quarantined stored run {second}" in message and "stored under another run's key" in message
    assert "label 'lr=0.1'" in message and arrays(second) == expected


def test_verify_checks_keys_and_checkpoints(tmp_path):
    plan_ = plan([FIXTURE], overrides={"lrs": "0.1,0.2,0.3"}, out=tmp_path / "out")
    execute(plan_)
    a, b, c = tasks_for(plan_)
    store = plan_.store
    shutil.copy(store.path(a.folder, a.key), store.path(b.folder, b.key))
    write_checkpoint(store.checkpoint_path(c.folder, c.key), c.key, {0: {"step": 3}})  # intact
    store.checkpoint_path(a.folder, a.key).write_bytes(b"garbage")
    done = cli("verify", tmp_path / "out")
    assert done.exit_code == 1, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"3 stored runs in {store.root}: 2 intact, 1 quarantined; 2 checkpoints: 1 intact, "
                               f"1 quarantined")
    moved = {store.root / QUARANTINE / FIXTURE / f"{b.key}.npz", store.root / QUARANTINE / FIXTURE / f"{a.key}.ckpt"}
    assert {Path(line.split()[-1]) for line in lines[1:]} == moved and all(p.is_file() for p in moved)
    again = ResultStore(store.root, keyed=True).verify()
    assert (again.runs, again.checkpoints, again.quarantined, again.unmovable) == (2, 1, [], [])


# 4. --only that names nothing

@pytest.mark.parametrize("only", ["", ",", " , "])
def test_an_only_that_names_no_experiment_exits_2(tmp_path, monkeypatch, only):
    def everything(*args, **kwargs):
        raise AssertionError("planned every experiment")

    monkeypatch.setattr("repdyn.cli.plan", everything)
    for command in ("reproduce", "plan"):
        one_line_error(cli(command, "--only", only, "--out", tmp_path / "out"), 2, "names no experiment")
    assert not (tmp_path / "out").exists()


# 5. sizes and workers

def test_a_config_that_cannot_fit_in_memory_exits_2_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    done = cli("run", "fixture.tanh_regression", "--set", "width=100000000000", "--out", out, "--quiet")
    one_line_error(done, 2, "fixture.tanh_regression: run 'run=0' does not fit in memory")
    assert "GiB available here" in done.stderr and "3200000000000 bytes" in done.stderr
    assert not out.exists()


def test_more_jobs_than_processors_is_warned_about(tmp_path, caplog):
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    with caplog.at_level(logging.WARNING, logger="repdyn"):
        preflight(plan_, workers() + 1, None)
    (message,) = warnings_of(caplog)
    assert f"--jobs {workers() + 1} is more than the {workers()} processors here" in message


# 6. a damaged or foreign manifest

@pytest.mark.parametrize(("damage", "reason"), [
    (lambda text: text[: len(text) // 2], "JSONDecodeError"),
    (lambda text: "not json", "JSONDecodeError"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "seed"}), "KeyError: 'seed'"),
    (lambda text: "[1, 2]", "TypeError"),
    (lambda text: json.dumps({**json.loads(text), "experiments": {FIXTURE: 3}}), "TypeError"),
])
def test_a_damaged_or_foreign_manifest_is_one_error_exit_2(tmp_path, damage, reason):
    out = tmp_path / "out"
    write_manifest(plan([FIXTURE], out=out))
    manifest = out / "manifest.json"
    manifest.write_text(damage(manifest.read_text()))
    done = cli("report", out)
    one_line_error(done, 2, f"{manifest} is damaged or not written by repdyn ({reason}")


# 7. a quarantine move that fails

def test_a_corrupt_file_that_cannot_be_moved_is_one_error(tmp_path, monkeypatch):
    plan_ = plan([FIXTURE], out=tmp_path / "out")
    execute(plan_)
    task = tasks_for(plan_)[0]
    path = plan_.store.path(task.folder, task.key)
    garbage(path)
    (plan_.store.root / QUARANTINE).write_text("a file where the quarantine folder goes")
    with pytest.raises(WriteError, match=f"{path} is corrupt .* and cannot be moved to .*; remove it by hand"):
        plan_.store.verified(task.folder, task.key)
    done = cli("verify", tmp_path / "out")
    one_line_error(done, 1, f"] {path} is corrupt (unreadable")
    assert "1 stored runs in" in done.stdout and "1 intact, 0 quarantined" in done.stdout and path.exists()
    (plan_.store.root / QUARANTINE).unlink()
    real_replace = os.replace

    def immutable(source, target):
        if QUARANTINE in str(target):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", immutable)
    done = cli("run", FIXTURE, "--out", tmp_path / "out", "--quiet")
    one_line_error(done, 1, f"{path} is corrupt (unreadable")
    assert "(PermissionError: Operation not permitted); remove it by hand" in done.stderr


# 8. orphaned workers

def test_workers_exit_when_the_main_process_is_killed(tmp_path, cli_env):
    trace = tmp_path / "trace"
    env = {**cli_env, "REPDYN_FIXTURE_TRACE": str(trace), "REPDYN_FIXTURE_DELAY": "60"}
    main = subprocess.Popen([sys.executable, "-m", "repdyn", "reproduce", "--only", "fixture.tanh_regression",
                             "--jobs", "2", "--out", str(tmp_path / "out"), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while (not trace.exists() or len(trace.read_text().splitlines()) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = {int(line.split()[1]) for line in trace.read_text().splitlines()}
        assert len(pids) == 2 and main.pid not in pids  # two workers, each sleeping in its run
        main.kill()
        main.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(main.pid, 0)  # anything left of its process group: workers, resource trackers
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("processes of the killed reproduction are still alive")
    finally:
        try:
            os.killpg(main.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# 9. results do not depend on the thread count

def test_a_run_computes_on_one_thread_whatever_the_process_uses(tmp_path):
    results = []
    for threads in (4, 1):
        plan_ = plan(["fixture.tanh_regression"], overrides={"n": "4096", "width": "64", "runs": "1", "steps": "3"},
                     out=tmp_path / f"threads{threads}")
        (task,) = tasks_for(plan_)
        torch.set_num_threads(threads)
        try:
            assert execute_task(task) == "ok" and torch.get_num_threads() == threads  # restored after the run
        finally:
            torch.set_num_threads(1)
        results.append(arrays(plan_.store.path(task.folder, task.key)))
    assert results[0] == results[1]


# 10. the cleaner spares a checkpoint being written

def test_cleaning_spares_the_temporary_file_of_a_checkpoint_being_written(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    checkpointer = Checkpointer(store.checkpoint_path("e", "abc123"), every=0.0)
    real_replace, cleaned = os.replace, []

    def replace_after_a_clean(source, target):
        if Path(source).name.startswith(".tmp-"):
            cleaned.append(store.clean_temporaries())  # another reproduction starting on this folder
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace_after_a_clean)
    with store.lock("e", "abc123"):  # a run computes under its lock
        checkpointer.save(0, {"step": 1})
    assert cleaned == [0] and store.checkpoint_path("e", "abc123").is_file()
    monkeypatch.setattr(os, "replace", real_replace)
    stale = tmp_path / "e" / ".tmp-abc123-x1y2.ckpt"  # a killed writer's
    stale.write_bytes(b"half")
    assert store.clean_temporaries() == 1 and not stale.exists()


# 11. exit codes

@pytest.mark.parametrize(("cluster", "message"), [
    ("foo://bar", "unknown scheme 'foo'"),
    ("tcp://127.0.0.1:1", "no Dask scheduler answered"),
])
def test_a_bad_cluster_exits_2_before_anything_is_written(tmp_path, cluster, message):
    done = cli("reproduce", "--only", FIXTURE, "--cluster", cluster, "--out", tmp_path / "out", "--quiet")
    one_line_error(done, 2, message)
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_be_written_exits_2(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    one_line_error(cli("run", FIXTURE, "--out", a_file / "out", "--quiet"), 2,
                   f"--out {a_file / 'out'} cannot be written: Not a directory")
    one_line_error(cli("run", FIXTURE, "--out", a_file, "--quiet"), 2, f"--out {a_file} is not a folder")
    assert a_file.read_text() == ""
