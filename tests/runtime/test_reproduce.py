"""The runtime end to end through the ``repdyn`` command, on the least-squares fixture experiment."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FIXTURE = "fixture.least_squares"


def repdyn(*args: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repdyn", *args], capture_output=True, text=True, env=env,
                          timeout=600, **kwargs)


def stored(out: Path) -> list[Path]:
    return sorted((out / "runs" / FIXTURE).glob("[!.]*.npz"))  # not the writers' .tmp-* files


def test_run_writes_report_claims_and_metrics(tmp_path, cli_env):
    out = tmp_path / "out"
    done = repdyn("run", FIXTURE, "--scale", "smoke", "--out", str(out), "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["verdicts"]["reproduced"] == summary["total"] == 2 and summary["differ"] == []
    # the analysis's own CPU time (a figure of two loss curves: more than nothing, well under 30 s)
    assert list(summary["analysis_seconds"]) == [FIXTURE] and 0 < summary["analysis_seconds"][FIXTURE] < 30
    claims = json.loads((out / "claims.json").read_text())
    assert {c["id"] for c in claims["claims"]} == {"converges", "first_lr"}
    assert all(c["estimate"] < 1e-6 and c["verdict"] == "reproduced" for c in claims["claims"])
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert list(metrics["run"]) == ["lr=0.1", "lr=0.2"] and (metrics["error"] < 1e-6).all()
    html = (out / "index.html").read_text()
    assert "data:image/png;base64," in html and "every evaluated claim has the verdict recorded in code" in html.lower()


@pytest.mark.parametrize(("args", "message"), [
    (["run", "no.such"], "unknown experiment 'no.such'"),
    (["run", FIXTURE, "--set", "depth=3"], "unknown setting 'depth': allowed keys are n, d, lrs, steps, delay"),
    (["run", FIXTURE, "--set", "n=many"], "n='many' is not a valid int"),
    (["run", FIXTURE, "--set", "n=0"], "n=0 is out of range: must be >= 2"),
    (["run", FIXTURE, "--set", "lrs=0.1,-1"], "lrs=-1.0 is out of range: must be > 0"),
    (["run", FIXTURE, "--scale", "quik"], "unknown scale 'quik': choose one of smoke, quick, full, paper"),
    (["reproduce", "--only", "nonsense"], "unknown experiment 'nonsense'"),
    (["run", FIXTURE, "--device", "tpu"], "unknown device 'tpu': choose cpu or cuda"),
    (["report", "missing-folder"], "no manifest.json here"),
    (["run", FIXTURE, "--jobs", "0"], "--jobs 0 is out of range: must be >= 1"),
    (["run", FIXTURE, "--progress-every", "0"], "--progress-every 0 is out of range: must be > 0 seconds"),
    (["reproduce", "--only", FIXTURE, "--cluster", "local:zero"], "write local:N with N >= 1 workers"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, cli_env, args, message):
    done = repdyn(*args, "--out", str(tmp_path / "out"), env=cli_env) if args[0] != "report" else \
        repdyn(*args, env=cli_env, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_diverged_run_is_stored_and_fails_only_its_claims(tmp_path, cli_env):
    out = tmp_path / "out"
    done = repdyn("run", FIXTURE, "--set", "lrs=0.1,5", "--out", str(out), "--json", env=cli_env)
    assert done.returncode == 1
    claims = {c["id"]: c for c in json.loads(done.stdout)["claims"]}
    assert claims["first_lr"]["verdict"] == "reproduced"
    assert claims["converges"]["verdict"] == "not reproduced" and not claims["converges"]["as_recorded"]
    assert "run 'lr=5' diverged at step" in claims["converges"]["note"]
    assert "REPRODUCED (recorded: reproduced) fixture.least_squares:converges" not in done.stderr
    runs = pd.read_csv(out / "runs.csv")
    assert dict(zip(runs["label"], runs["status"])) == {"lr=0.1": "ok", "lr=5": "diverged"}
    # a second invocation reads the diverged run back instead of retrying it
    again = repdyn("run", FIXTURE, "--set", "lrs=0.1,5", "--out", str(out), "--json", env=cli_env)
    assert again.returncode == 1 and len(stored(out)) == 2


def test_killed_reproduction_resumes_without_recomputing(tmp_path, cli_env):
    out = tmp_path / "out"
    args = ["run", FIXTURE, "--set", "lrs=0.1,0.2,0.3,0.4", "--set", "delay=1", "--out", str(out)]
    process = subprocess.Popen([sys.executable, "-m", "repdyn", *args], env=cli_env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(stored(out)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in stored(out)}
    assert 2 <= len(finished) < 4
    assert not (out / "index.html").exists()
    resumed = repdyn(*args, env=cli_env)
    assert resumed.returncode == 0, resumed.stderr
    after = {p.name: p.stat().st_mtime_ns for p in stored(out)}
    assert len(after) == 4 and all(after[name] == mtime for name, mtime in finished.items())
    assert not list((out / "runs" / FIXTURE).glob(".tmp-*"))
    forced = repdyn(*args[:-2], "--out", str(out), "--force", env=cli_env)
    assert forced.returncode == 0
    assert all(p.stat().st_mtime_ns != after[p.name] for p in stored(out))


def test_same_config_and_seed_give_bit_identical_results(tmp_path, cli_env):
    outs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for out, seed in zip(outs, ("7", "7", "8")):
        assert repdyn("run", FIXTURE, "--seed", seed, "--out", str(out), env=cli_env).returncode == 0
    first, second, other = ([np.load(p)["w"] for p in stored(out)] for out in outs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, second))
    assert not all(np.array_equal(a, c) for a, c in zip(first, other))


def test_report_rerenders_from_stored_runs(tmp_path, cli_env):
    out = tmp_path / "out"
    assert repdyn("run", FIXTURE, "--out", str(out), env=cli_env).returncode == 0
    mtimes = [p.stat().st_mtime_ns for p in stored(out)]
    (out / "index.html").unlink()
    done = repdyn("report", str(out), env=cli_env)
    assert done.returncode == 0 and "2 claims: 2 reproduced" in done.stdout
    assert (out / "index.html").is_file() and [p.stat().st_mtime_ns for p in stored(out)] == mtimes


def test_list_shows_claims_and_sources(cli_env):
    done = repdyn("list", "--json", env=cli_env)
    assert done.returncode == 0
    fixture = next(e for e in json.loads(done.stdout) if e["name"] == FIXTURE)
    assert fixture["claims"][0] == {"id": "converges", "statement": "GD reaches the least-squares solution",
                                    "source": "closed form (normal equations)", "expected": "≤ 1e-06", "quote": "",
                                    "band_reason": "", "recorded": "reproduced", "preconditions": [],
                                    "no_precondition": None, "null_effect": None, "full_only": None}
    fits = next(e for e in json.loads(done.stdout) if e["name"] == "fixture.fits")
    assert fits["claims"][0]["quote"] == "gradient descent"
    assert "“gradient descent”" in repdyn("list", env=cli_env).stdout


def test_an_experiment_without_its_optional_data_is_skipped_not_failed(tmp_path, cli_env):
    out = tmp_path / "out"
    done = repdyn("run", "elastic_sde.cifar", "--scale", "smoke", "--out", str(out), "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["verdicts"]["skipped"] == summary["total"] > 0 and summary["differ"] == []
    assert all("no CIFAR-10 folder given" in c["note"] for c in summary["claims"])
    bad = repdyn("run", "elastic_sde.cifar", "--set", "data_dir=/no/such", "--out", str(tmp_path / "x"), env=cli_env)
    assert bad.returncode == 2 and "data_dir='/no/such' is not a folder" in bad.stderr


@pytest.mark.parametrize(("args", "verdict", "code"), [
    (["fixture.fits"], "reproduced", 0),
    (["fixture.documented"], "not reproduced", 0),
    (["fixture.fits", "--set", "seeds=2"], "inconclusive", 1),
    (["fixture.fits", "--set", "broken=true"], "vacuous", 1),
])
def test_exit_code_is_0_only_when_every_verdict_is_the_recorded_one(tmp_path, cli_env, args, verdict, code):
    done = repdyn("run", *args, "--out", str(tmp_path / "out"), "--json", env=cli_env)
    assert done.returncode == code, done.stderr
    summary = json.loads(done.stdout)
    (claim,) = summary["claims"]
    assert claim["verdict"] == verdict and summary["verdicts"][verdict] == 1
    assert summary["differ"] == ([] if code == 0 else [f"{args[0]}:{claim['id']}"])
    assert claim["control_value"] is not None and claim["n_seeds"] == (2 if "seeds=2" in args else 5)
    if verdict == "not reproduced":
        assert "noise floor" in claim["disagreement"]
    plain = repdyn("report", str(tmp_path / "out"), env=cli_env)
    assert plain.returncode == code and (code == 0) == (f"{verdict.upper()} (recorded" not in plain.stdout)


def test_controls_run_as_stored_runs_sharing_their_seed(tmp_path, cli_env):
    out = tmp_path / "out"
    assert repdyn("run", "fixture.fits", "--out", str(out), env=cli_env).returncode == 0
    files = sorted((out / "runs" / "fixture.fits").glob("[!.]*.npz"))
    assert len(files) == 10  # 5 seeds, each once trained and once as the untrained control
    runs = pd.read_csv(out / "runs.csv")
    assert sum("[control: the untrained network (steps = 0)]" in label for label in runs["label"]) == 5
    seeds = {}
    for path in files:
        meta = json.loads(str(np.load(path)["__meta__"]))
        seeds.setdefault(meta["label"], set()).add((meta["seed"], meta["config"]["steps"]))
    assert all(len({seed for seed, _ in pairs}) == 1 and {s for _, s in pairs} == {0, 300}
               for pairs in seeds.values())


def test_runs_of_one_seed_group_share_their_seed(tmp_path, monkeypatch):
    from repdyn.framework.base import RunSpec
    from repdyn.runtime import registry
    from repdyn.runtime.reproduce import plan, tasks_for

    experiment = registry.get("fixture.fits")
    runs = [RunSpec(f"alpha={i}", {"i": i}, seed_group="data") for i in range(3)] + [RunSpec("other")]
    monkeypatch.setattr(type(experiment), "runs", lambda self, config: runs)
    tasks = [t for t in tasks_for(plan(["fixture.fits"], scale="smoke", out=tmp_path)) if t.config["steps"] > 0]
    seeds = {t.label: t.seed for t in tasks}
    assert seeds["alpha=0"] == seeds["alpha=1"] == seeds["alpha=2"] != seeds["other"]
    assert len({t.key for t in tasks}) == 4


def test_configs_differing_only_in_analysis_fields_share_their_runs(tmp_path):
    from repdyn.runtime.reproduce import analyse, execute, plan, tasks_for

    plain, broken = (plan(["fixture.fits"], scale="smoke", out=tmp_path, overrides=o) for o in ({}, {"broken": "true"}))
    assert {t.key for t in tasks_for(plain)} == {t.key for t in tasks_for(broken)}
    execute(plain)
    stored = sorted((tmp_path / "runs" / "fixture.fits").glob("[!.]*.npz"))
    [outcome] = analyse(broken, recompute=False)  # every run it needs is already stored
    assert sorted((tmp_path / "runs" / "fixture.fits").glob("[!.]*.npz")) == stored
    assert outcome.claims[0].values == (0.0,) * 5


def test_a_run_that_reads_an_analysis_field_is_refused(tmp_path, monkeypatch):
    from repdyn.runtime import registry
    from repdyn.runtime.reproduce import execute, plan
    from repdyn.runtime.tasks import TaskFailed

    experiment = registry.get("fixture.fits")
    monkeypatch.setattr(type(experiment), "execute", lambda self, config, run, seed, device: {"ratio": config.broken})
    with pytest.raises(TaskFailed, match=r"FitConfig.broken is an analysis-only field"):
        execute(plan(["fixture.fits"], scale="smoke", out=tmp_path))


def test_experiments_analysed_side_by_side_give_what_one_process_gives(tmp_path):
    """After the runs (analyse, one process or two) or beside them (reproduce): the same outcomes."""
    from repdyn.runtime.reproduce import analyse, plan, reproduce

    plan_ = plan([FIXTURE, "fixture.fits"], scale="smoke", out=tmp_path)
    beside_runs = reproduce(plan_, jobs=2)
    alone, side_by_side = analyse(plan_), analyse(plan_, jobs=2)
    for outcomes in (side_by_side, beside_runs):
        assert [o.name for o in outcomes] == [FIXTURE, "fixture.fits"]
        for one, two in zip(alone, outcomes):
            assert [c.to_json() for c in one.claims] == [c.to_json() for c in two.claims]
            assert one.metrics == two.metrics and one.figures.keys() == two.figures.keys()
            assert one.claims and all(c.estimate is not None for c in one.claims)


def test_the_work_a_finished_run_unblocks_goes_ahead_of_the_runs_waiting(tmp_path):
    """Two workers, four runs of 0.4 s: the follow-up of the first finished run (an experiment's analysis, in
    reproduce) starts before the third and fourth runs start."""
    import functools

    from repdyn.runtime.executors import run_local
    from repdyn.runtime.reproduce import plan, tasks_for

    plan_ = plan(["fixture.tanh_regression"], scale="smoke", out=tmp_path, overrides={"runs": "4", "delay": "0.4"})
    finished, follow_up_ran = [], []
    run_local(tasks_for(plan_), 2, lambda task, status: finished.append(status),
              then=lambda task, status: [functools.partial(time.time)] if len(finished) == 1 else [],
              on_result=follow_up_ran.append)
    assert finished == ["ok"] * 4 and len(follow_up_ran) == 1
    starts = sorted(json.loads(str(np.load(path)["__meta__"]))["started_at"]
                    for path in (tmp_path / "runs" / "fixture.tanh_regression").glob("[!.]*.npz"))
    assert follow_up_ran[0] < starts[2]


def test_off_a_terminal_runs_write_progress_lines_into_the_log(tmp_path, cli_env):
    log = tmp_path / "log"
    with log.open("w") as handle:
        done = subprocess.run([sys.executable, "-m", "repdyn", "run", "fixture.tanh_regression", "--set", "runs=3",
                               "--set", "steps=3000", "--progress-every", "0.05", "--out", str(tmp_path / "out")],
                              env=cli_env, stdout=subprocess.DEVNULL, stderr=handle, timeout=600)
    assert done.returncode == 0
    lines = log.read_text().splitlines()
    assert "3 of 3 runs to compute (0 stored)" in lines[0]
    assert re.search(r"start fixture.tanh_regression run=0 \(seed \d+\)$", lines[1])  # the run named fully
    inside = [line for line in lines if re.search(r"fixture.tanh_regression run=0 \(seed \d+\): step ", line)]
    assert inside and all("/3000, loss " in line and "steps/s, ETA " in line for line in inside)
    assert any(int(line.split("step ")[1].split("/")[0]) < 3000 for line in inside)  # written during the run
    assert any(re.search(r"end fixture.tanh_regression run=0 \(seed \d+\): ok in ", line) for line in lines)
    quiet = subprocess.run([sys.executable, "-m", "repdyn", "run", "fixture.tanh_regression", "--set", "runs=1",
                            "--quiet", "--force", "--out", str(tmp_path / "out")], env=cli_env, capture_output=True,
                           text=True, timeout=600)
    assert quiet.returncode == 1 and quiet.stderr == ""  # one run: inconclusive, and nothing on stderr


def test_plan_estimates_cheap_experiments_within_a_factor_two_before_anything_runs(tmp_path, cli_env):
    """CPU seconds of a sub-second run depend on what else the machine runs at that moment (a second test
    worker on the same core slows both), so an estimate and the run it predicts, timed a second apart, are
    compared up to three times on fresh folders: a systematic error fails every time, a noisy neighbour once."""
    from repdyn.runtime.estimate import estimate
    from repdyn.runtime.reproduce import execute, plan

    def ratios(out: Path) -> dict[str, float]:
        plan_ = plan(["fixture.tanh_regression", "fixture.least_squares"], scale="smoke",
                     overrides={"steps": "20000"}, out=out)
        estimates = {e.experiment: e for e in estimate(plan_, within=0.5, budget=0.5)}
        assert not out.exists()  # an estimate writes nothing
        assert "of 20000 steps calibrated" in estimates["fixture.tanh_regression"].basis
        assert estimates["fixture.least_squares"].basis == "run 'lr=0.1' timed whole"
        execute(plan_)
        found = {}
        for name, e in estimates.items():
            paths = list((plan_.store.root / name).glob("[!.]*.npz"))
            assert e.runs == len(paths)
            found[name] = e.cpu_seconds / sum(json.loads(str(np.load(path)["__meta__"]))["cpu_seconds"]
                                              for path in paths)
        again = {e.experiment: e for e in estimate(plan_, within=0.5, budget=0.5)}
        assert all(e.runs == 0 and e.cpu_seconds == 0 for e in again.values())
        return found

    attempts = []
    for attempt in range(3):
        attempts.append(ratios(tmp_path / f"out{attempt}"))
        if all(0.5 <= ratio <= 2.0 for ratio in attempts[-1].values()):
            break
    assert all(0.5 <= ratio <= 2.0 for ratio in attempts[-1].values()), attempts
    listed = repdyn("plan", "--only", "fixture", "--scale", "smoke", "--out", str(tmp_path / "x"), env=cli_env)
    assert listed.returncode == 0 and "fixture.fits" in listed.stdout and "total: " in listed.stdout
    assert not (tmp_path / "x").exists()


def test_plan_bounds_what_its_calibration_cannot_time(tmp_path):
    """A set-up longer than the limit gives a lower bound (the limit per run); a first step longer than it an
    upper bound (that step, set-up included, for every step); so does a rate over a step count that is only a cap;
    calibrations run side by side."""
    from repdyn.runtime.estimate import estimate
    from repdyn.runtime.reproduce import plan

    slow_setup = plan(["fixture.tanh_regression"], scale="smoke", overrides={"runs": "2", "setup_cpu": "5"},
                      out=tmp_path / "a")
    (e,) = estimate(slow_setup, within=1.0)
    assert (e.bound, e.cpu_seconds, e.cost()) == ("at least", 2 * 2.0, "≥ 4 s")
    assert "reported no progress within 2 CPU-s" in e.basis
    slow_step = plan(["fixture.tanh_regression"], scale="smoke", overrides={"runs": "1", "steps": "10",
                                                                           "step_cpu": "1.5"}, out=tmp_path / "b")
    (e,) = estimate(slow_step, within=1.0)
    assert e.bound == "at most" and "1 of 10 steps in 2 CPU-s" in e.basis
    assert 10 * 1.5 <= e.cpu_seconds <= 10 * 2.0
    capped = plan(["fixture.tanh_regression"], scale="smoke", overrides={"runs": "1", "steps": "20000",
                                                                        "capped": "true"}, out=tmp_path / "c")
    (e,) = estimate(capped, within=0.5, budget=0.5)  # a loop that may stop before its cap: its rate bounds it
    assert e.bound == "at most" and "of at most 20000 steps calibrated" in e.basis


def test_a_run_killed_mid_training_resumes_from_its_checkpoint_bit_identical(tmp_path, cli_env):
    args = ["run", "fixture.long_training", "--set", "steps=2500"]
    reference = repdyn(*args, "--checkpoint-every", "0", "--out", str(tmp_path / "reference"), env=cli_env)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "out"
    folder = out / "runs" / "fixture.long_training"
    process = subprocess.Popen([sys.executable, "-m", "repdyn", *args, "--checkpoint-every", "0.002", "--out",
                                str(out)], env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(folder.glob("*.ckpt")) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    time.sleep(0.5)  # let it train on past its first checkpoint
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert list(folder.glob("*.ckpt")) and not list(folder.glob("[!.]*.npz"))
    log = tmp_path / "log"
    with log.open("w") as handle:
        resumed = subprocess.run([sys.executable, "-m", "repdyn", *args, "--checkpoint-every", "0.002",
                                  "--progress-every", "0.001", "--out", str(out)], env=cli_env,
                                 stdout=subprocess.DEVNULL, stderr=handle, timeout=600)
    assert resumed.returncode == 0, log.read_text()
    first_step = int(next(line for line in log.read_text().splitlines() if ": step " in line)
                     .split(": step ")[1].split("/")[0])
    assert first_step > 0  # it went on from the checkpoint, not from step 0
    assert not list(folder.glob("*.ckpt"))  # removed once the result is stored
    (done,) = (np.load(p) for p in folder.glob("[!.]*.npz"))
    (expected,) = (np.load(p) for p in (tmp_path / "reference" / "runs" / "fixture.long_training").glob("[!.]*.npz"))
    assert sorted(done.files) == sorted(expected.files)
    for name in expected.files:
        if name != "__meta__":
            assert done[name].tobytes() == expected[name].tobytes(), name


def test_stored_runs_record_when_they_ran(tmp_path):
    """started_at/finished_at (epoch seconds) bracket each run: the benchmark's timeline of a sweep."""
    from repdyn.runtime.reproduce import execute, plan

    before = time.time()
    execute(plan(["fixture.least_squares"], scale="smoke", out=tmp_path, overrides={"delay": "0.3"}))
    after = time.time()
    metas = [json.loads(str(np.load(path)["__meta__"]))
             for path in (tmp_path / "runs" / "fixture.least_squares").glob("[!.]*.npz")]
    assert len(metas) == 2
    for meta in metas:
        assert before <= meta["started_at"] < meta["finished_at"] <= after
        assert meta["finished_at"] - meta["started_at"] == pytest.approx(meta["seconds"], abs=0.05)
        assert meta["seconds"] >= 0.3
    first, second = sorted(metas, key=lambda m: m["started_at"])
    assert second["started_at"] >= first["finished_at"]  # one process: one run after the other


def test_the_analysis_draws_the_claims_figure_so_the_report_only_embeds(tmp_path, monkeypatch):
    from repdyn.report import render
    from repdyn.runtime.reproduce import analyse, execute, plan

    plan_ = plan([FIXTURE, "fixture.tanh_regression"], scale="smoke", out=tmp_path / "out")
    execute(plan_)
    least_squares, tanh = analyse(plan_)
    assert list(least_squares.figures) == ["loss"]  # one value per claim: nothing for a claims figure to show
    assert list(tanh.figures) == ["claims"]  # per-seed values, drawn by the analysis
    assert tanh.figures["claims"].startswith(b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr("matplotlib.figure.Figure.savefig", lambda *a, **k: pytest.fail("the report drew a figure"))
    html = render.write_report(plan_.out, [least_squares, tanh], scale="smoke", seed=0, device="cpu").read_text()
    assert html.count("data:image/png;base64,") == 2


def test_a_shared_run_is_trained_once_and_read_by_every_experiment_declaring_it(tmp_path, monkeypatch):
    """Two experiments with different configs declare the run fixture.shared_solution (and its untrained control):
    it is keyed by its params alone, stored once in its own folder, trained once, and both analyses read it, also
    when the analyses run beside the runs (jobs 2: the shared run unblocks both)."""
    from test_integrity import computed

    from repdyn.runtime.reproduce import plan, reproduce, tasks_for

    trace = tmp_path / "trace"
    monkeypatch.setenv("REPDYN_FIXTURE_TRACE", str(trace))
    names = ["fixture.reads_a", "fixture.reads_b"]
    plan_ = plan(names, scale="smoke", out=tmp_path / "out")
    shared = [t for t in tasks_for(plan_) if t.shared]
    assert len(shared) == 2 and {t.params["steps"] for t in shared} == {0, 300}  # trained and untrained, once each
    outcomes = reproduce(plan_, jobs=2)
    assert computed(trace) == sorted(["shared"] * 2 + [f"{n}:own" for n in names for _ in range(2)])
    assert len(list((tmp_path / "out" / "runs" / "fixture.shared_solution").glob("[!.]*.npz"))) == 2
    a, b = ([c.to_json() for c in o.claims] for o in outcomes)
    assert [c["values"] for c in a] == [c["values"] for c in b] and a[0]["verdict"] == "reproduced"
    assert [o.metrics for o in outcomes] == [[{"offset": 0.0}], [{"offset": 1.0}]]  # each its own run too


def test_either_reader_of_a_shared_run_runs_alone_and_the_other_resumes_from_it(tmp_path, cli_env):
    from test_integrity import computed, traced

    out, trace = tmp_path / "out", tmp_path / "trace"
    env = traced(cli_env, trace)
    first = repdyn("run", "fixture.reads_b", "--out", str(out), "--json", env=env)
    assert first.returncode == 0, first.stderr
    assert computed(trace) == sorted(["shared"] * 2 + ["fixture.reads_b:own"] * 2)
    second = repdyn("run", "fixture.reads_a", "--out", str(out), "--json", env=env)
    assert second.returncode == 0, second.stderr
    assert computed(trace) == sorted(["shared"] * 2 + ["fixture.reads_a:own", "fixture.reads_b:own"] * 2)
    assert json.loads(first.stdout)["claims"][0]["values"] == json.loads(second.stdout)["claims"][0]["values"]
    alone = repdyn("run", "fixture.reads_a", "--out", str(tmp_path / "alone"), "--json", env=cli_env)
    assert json.loads(alone.stdout)["claims"] == json.loads(second.stdout)["claims"]


def test_a_shared_run_may_not_read_its_experiments_config(tmp_path, monkeypatch):
    from repdyn.runtime import registry
    from repdyn.runtime.reproduce import execute, plan
    from repdyn.runtime.tasks import TaskFailed

    experiment = registry.get("fixture.reads_a")
    monkeypatch.setattr(type(experiment), "execute", lambda self, config, run, seed, device: {"n": config.seeds})
    with pytest.raises(TaskFailed, match=r"SharedConfig.seeds is a field of the declaring experiment's config"):
        execute(plan(["fixture.reads_a"], scale="smoke", out=tmp_path))


def test_local_workers_keep_the_worker_replaced_warning_of_loky_from_the_user(tmp_path):
    """loky warns from its manager thread when it replaces a worker whose memory grew (a worker here holds whole
    experiments of differing sizes); that warning is filtered while the workers run, any other warning is not."""
    import warnings

    from repdyn.runtime.executors import WORKER_REPLACED, run_local
    from repdyn.runtime.reproduce import plan, tasks_for

    plan_ = plan(["fixture.tanh_regression"], scale="smoke", out=tmp_path, overrides={"runs": "2"})

    def on_done(task, status):
        loky_says = WORKER_REPLACED + ". This can be caused by a too short worker timeout or by a memory leak."
        warnings.warn(loky_says, UserWarning, stacklevel=1)
        warnings.warn("another warning", UserWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_local(tasks_for(plan_), 2, on_done)
    assert [str(w.message) for w in caught] == ["another warning"] * 2
