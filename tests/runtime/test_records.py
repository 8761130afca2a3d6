"""Recorded full-scale verdicts, on the fixture paper 990: ``repdyn record`` writes one record per paper from a full
reproduction; a changed full config makes it stale; the quick report shows each claim's full verdict beside its
quick one, and a claim decided at full only is recorded ``undecided at quick``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from repdyn.framework.records import config_hash, load_records, stale
from repdyn.runtime import registry


def repdyn(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repdyn", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A full reproduction of paper 990 and its record in <tmp>/records."""
    tmp_path = tmp_path_factory.mktemp("recorded")
    env = {**os.environ, "COLUMNS": "200", "REPDYN_RECORDS": str(tmp_path / "records")}
    full = repdyn("reproduce", "--scale", "full", "--only", "fixture_recorded", "--out", str(tmp_path / "full"),
                  "--quiet", env=env)
    assert full.returncode == 0, full.stdout + full.stderr
    made = repdyn("record", str(tmp_path / "full"), env=env)
    assert made.returncode == 0, made.stderr
    assert "paper 990: 2 claims" in made.stdout
    return env, tmp_path / "records"


def test_a_record_holds_the_claims_commit_machine_cpu_and_config_hashes(recorded):
    _, folder = recorded
    record = json.loads((folder / "990.json").read_text())
    experiment = registry.get("fixture_recorded.fit")
    assert record["scale"] == "full" and record["paper"] == "990" and record["commit"]
    assert record["config_hashes"] == {"fixture_recorded.fit": config_hash(experiment.config("full"))}
    assert record["machine"]["cpus"] >= 1 and record["cpu_seconds"]["total"] > 0
    assert [(c["id"], c["verdict"], c["n_seeds"]) for c in record["claims"]] == [("fits", "reproduced", 8),
                                                                                ("eight_seeds", "reproduced", 8)]
    assert record["claims"][0]["preconditions"][0]["met"] is True


def test_a_changed_full_config_makes_the_record_stale(recorded):
    _, folder = recorded
    records = load_records(folder)
    experiment = registry.get("fixture_recorded.fit")
    assert stale(records, {experiment.name: ("990", experiment.config("full"))}) == []
    changed = dataclasses.replace(experiment.config("full"), steps=401)
    (problem,) = stale(records, {experiment.name: ("990", changed)})
    assert "fixture_recorded.fit's full config changed" in problem
    assert stale(records, {experiment.name: ("990", changed), "fixture_recorded.new": ("990", changed)})[-1] == \
        "990: fixture_recorded.new has no recorded full verdicts"


def test_the_quick_report_shows_the_full_verdict_and_a_full_only_claim_is_undecided_at_quick(recorded, tmp_path):
    env, _ = recorded
    quick = repdyn("reproduce", "--scale", "quick", "--only", "fixture_recorded", "--out", str(tmp_path / "q"),
                   "--quiet", "--json", env=env)
    assert quick.returncode == 0, quick.stdout + quick.stderr
    claims = {c["id"]: c for c in json.loads(quick.stdout)["claims"]}
    assert claims["fits"]["verdict"] == "reproduced" and claims["fits"]["full_record"]["verdict"] == "reproduced"
    assert claims["eight_seeds"]["verdict"] == "undecided"
    assert claims["eight_seeds"]["expected_verdict"] == "undecided at quick" and claims["eight_seeds"]["as_recorded"]
    assert claims["eight_seeds"]["full_record"]["n_seeds"] == 8
    html = (tmp_path / "q" / "index.html").read_text()
    assert f"full, {claims['fits']['full_record']['date']}" in html


def test_an_unreached_state_is_undecided_and_exits_1(tmp_path, cli_env):
    done = repdyn("run", "fixture_recorded.fit", "--set", "steps=3", "--out", str(tmp_path / "o"), "--quiet",
                  env=cli_env)
    assert done.returncode == 1
    assert "UNDECIDED (recorded: reproduced) fixture_recorded.fit:fits" in done.stdout
    assert "precondition not met (at the least-squares minimum): gradient_norm ≤ 1e-06" in done.stdout


def test_a_record_needs_a_full_scale_reproduction(tmp_path, cli_env):
    done = repdyn("run", "fixture_recorded.fit", "--out", str(tmp_path / "o"), "--quiet", env=cli_env)
    assert done.returncode == 0, done.stdout
    made = repdyn("record", str(tmp_path / "o"), "--to", str(tmp_path / "r"), env=cli_env)
    assert made.returncode == 2 and "a record is made from a full-scale reproduction, this one is quick" in made.stderr
    assert not (tmp_path / "r").exists()


def test_warnings_of_runs_and_analyses_go_into_the_report_not_the_terminal(tmp_path, cli_env):
    done = repdyn("run", "fixture_recorded.fit", "--set", "warn=true", "--out", str(tmp_path / "o"),
                  "--progress-every", "0.001", env=cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stderr and "Warning" not in done.stdout
    assert "fixture_recorded.fit seed=2 (seed " in done.stderr  # progress names the run fully
    html = (tmp_path / "o" / "index.html").read_text()
    assert "run seed=0: RuntimeWarning: All-NaN slice encountered" in html
    assert "analysis: RuntimeWarning: invalid value encountered in scalar divide" in html
