"""The training driver: its loop, looks, divergence, stopping, progress and checkpoints on a rule with a known
trajectory, and the adaptive Euler controller against its rule written out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from repdyn.nn.checkpoint import Checkpointer, checkpointing
from repdyn.nn.divergence import Diverged
from repdyn.nn.driver import AdaptiveEuler, Divergence, drive
from repdyn.nn.progress import reporting
from repdyn.nn.recording import Schedule


class Halving:
    """x ← x / 2 from x = 1, keeping x after every step (``seen``) and recording the x a step starts from in the
    series its schedules name (``recorded``); done once x < ``until``; x becomes NaN at ``nan_at``."""

    what = "x"

    def __init__(self, until: float = 0.0, nan_at: int = -1) -> None:
        self.x, self.until, self.nan_at = torch.tensor(1.0, dtype=torch.float64), until, nan_at
        self.seen: list[float] = []
        self.recorded: list[tuple[int, tuple[str, ...], float]] = []
        self.looks: list[int] = []

    def step(self, step: int, due: tuple[str, ...]) -> torch.Tensor:
        if due:
            self.recorded.append((step, due, float(self.x)))
        self.x = torch.tensor(math.nan) if step == self.nan_at else self.x / 2
        self.seen.append(float(self.x))
        return self.x

    def finite(self) -> bool:
        return bool(torch.isfinite(self.x))

    def first_bad_step(self, step: int) -> int:
        return self.nan_at

    def done(self) -> bool:
        return float(self.x) < self.until

    def look(self, step: int) -> None:
        self.looks.append(step)

    def state(self) -> dict:
        return {"x": self.x.clone(), "seen": list(self.seen), "recorded": list(self.recorded)}

    def load(self, state: dict) -> None:
        self.x, self.seen, self.recorded = state["x"], list(state["seen"]), list(state["recorded"])

    def result(self, steps: int) -> tuple[int, list[float]]:
        return steps, self.seen

    def final(self) -> dict:
        return {"x": self.x.clone()}

    def restore(self, final: dict) -> None:
        self.x = final["x"]


def test_drive_takes_the_steps_and_reports_each():
    reports = []
    with reporting(lambda step, total, value: reports.append((step, total, float(value)))):
        steps, seen = drive(Halving(), 5)
    assert (steps, seen) == (5, [0.5, 0.25, 0.125, 0.0625, 0.03125])
    assert reports == [(s, 5, 2.0 ** -(s + 1)) for s in range(5)]


def test_each_step_records_the_state_it_starts_from_in_the_schedules_holding_it():
    rule = Halving()
    drive(rule, 6, record={"x": range(0, 7, 2)})
    assert rule.recorded == [(0, ("x",), 1.0), (2, ("x",), 0.25), (4, ("x",), 0.0625)]  # no step starts from x(6)
    rule = Halving()
    drive(rule, 6, record={"x": Schedule.every(4, 5), "y": {1, 4}})
    assert rule.recorded == [(0, ("x",), 1.0), (1, ("y",), 0.5), (4, ("x", "y"), 0.0625), (5, ("x",), 0.03125)]
    rule = Halving()
    drive(rule, 6)
    assert rule.recorded == []


def test_the_rule_stops_at_a_look_only():
    rule = Halving(until=0.1)  # x < 0.1 after 4 halvings
    assert drive(rule, 50)[0] == 4 and rule.looks == [0, 1, 2, 3]
    rule = Halving(until=0.1)
    assert drive(rule, 50, sync_every=3)[0] == 6  # looked at steps 0, 3, 6
    assert rule.looks == [0, 3]


def test_a_non_finite_value_raises_naming_its_first_step_whatever_the_looks():
    for sync_every in (1, 4):
        with pytest.raises(Diverged, match="x became NaN/inf at step 2"):
            drive(Halving(nan_at=2), 10, sync_every=sync_every)
    with pytest.raises(Diverged, match="step 9"):  # found by the check after the last step
        drive(Halving(nan_at=9), 10, sync_every=4)


class Killed(Exception):
    pass


def test_a_killed_run_resumes_from_its_checkpoint_and_a_finished_loop_is_not_rerun(tmp_path):
    path = tmp_path / "run.ckpt"

    def kill_at(step: int):
        def listener(s, total, value):
            if s == step:
                raise Killed

        return listener

    record = {"x": range(0, 11, 3)}
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(6)), pytest.raises(Killed):
        drive(Halving(), 10, record=record)
    resumed, whole, seen_steps = Halving(), Halving(), []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda s, t, v: seen_steps.append(s)):
        assert drive(resumed, 10, record=record) == drive(whole, 10, record=record)
    assert seen_steps[0] == 6  # went on from the step the kill interrupted
    assert resumed.recorded == whole.recorded == [(s, ("x",), 2.0 ** -s) for s in (0, 3, 6, 9)]
    again = Halving()
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda s, t, v: seen_steps.append(s)):
        assert drive(again, 10)[0] == 10
    assert seen_steps[-1] == 9 and float(again.x) == 2.0 ** -10  # the result and final state came back, no step


def test_a_slot_saved_in_another_layout_is_not_resumed_from(tmp_path):
    path = tmp_path / "run.ckpt"
    checkpointer = Checkpointer(path, every=0.0)
    checkpointer.save(0, {"step": 3, "model": torch.zeros(2)})  # a layout of no driver format
    with checkpointing(Checkpointer(path, every=0.0)):
        assert drive(Halving(), 4)[1] == [0.5, 0.25, 0.125, 0.0625]


def test_bad_step_counts_are_refused():
    with pytest.raises(ValueError, match="steps=-1"):
        drive(Halving(), -1)
    with pytest.raises(ValueError, match="sync_every=0"):
        drive(Halving(), 3, sync_every=0)


def test_divergence_marks_members_and_raises_when_none_is_left():
    with pytest.raises(ValueError, match="'stop'"):
        Divergence("stop", 3)
    marking = Divergence("mark", 3)
    assert not marking.check(torch.tensor([1.0, 2.0, 3.0]), 0)
    assert marking.check(torch.tensor([1.0, math.nan, 3.0]), 4)
    assert marking.at == [-1, 4, -1] and marking.alive.tolist() == [True, False, True] and not marking.everyone
    assert not marking.check(torch.tensor([1.0, math.nan, 3.0]), 5)  # already marked
    with pytest.raises(Diverged, match="step 7"):
        marking.check(torch.tensor([math.inf, math.nan, math.nan]), 7)
    with pytest.raises(Diverged, match="loss became NaN/inf at step 2"):
        Divergence("raise", 2).check(torch.tensor([0.0, math.nan]), 2)


def _by_hand(rule: AdaptiveEuler, dgrad, dout, running, last_rejected, margin_event, dgrad_free):
    """Spec 003 §2.4's adaptive Euler rule for one trial, written out."""
    if not running:
        return False, False, False, math.inf
    small = dout < rule.max_dout
    jump = rule.jumps and small and (dgrad > 0.1 * last_rejected or margin_event)
    unchecked = jump or dgrad_free
    accept = small and (dgrad < rule.max_dgrad or unchecked)
    smooth = dgrad < rule.calm * rule.max_dgrad or (rule.grow_on_jumps and unchecked)
    grow = accept and dout < rule.calm * rule.max_dout and smooth
    reject = not accept
    return accept, grow, reject, dgrad if reject and small else math.inf


@pytest.mark.parametrize("rule", [AdaptiveEuler(), AdaptiveEuler(calm=0.1), AdaptiveEuler(jumps=False),
                                  AdaptiveEuler(grow_on_jumps=True, max_dgrad=1e-3, max_dout=0.5)])
def test_adaptive_euler_decides_every_trial_as_the_rule_written_out(rule):
    generator = torch.Generator().manual_seed(0)
    n = 4000
    dgrad = rule.max_dgrad * 10 ** (2 * torch.rand(n, generator=generator, dtype=torch.float64) - 1.5)
    dout = rule.max_dout * 10 ** (2 * torch.rand(n, generator=generator, dtype=torch.float64) - 1.5)
    running = torch.rand(n, generator=generator) < 0.9
    last = torch.where(torch.rand(n, generator=generator) < 0.5, math.inf,
                       rule.max_dgrad * 10 * torch.rand(n, generator=generator, dtype=torch.float64))
    event = torch.rand(n, generator=generator) < 0.2
    free = torch.rand(n, generator=generator) < 0.1
    verdict = rule.decide(dgrad, dout, running, last, event, free)
    for i in range(n):
        expected = _by_hand(rule, float(dgrad[i]), float(dout[i]), bool(running[i]), float(last[i]), bool(event[i]),
                            bool(free[i]))
        found = (bool(verdict.accept[i]), bool(verdict.grow[i]), bool(verdict.reject[i]),
                 float(verdict.last_rejected[i]))
        assert found == expected, i
    dt = torch.ones(n, dtype=torch.float64)
    new = rule.next_dt(dt, verdict)
    grown, shrunk = torch.full_like(dt, 1.1), torch.full_like(dt, 0.1)
    assert torch.equal(new, torch.where(verdict.grow, grown, torch.where(verdict.reject, shrunk, dt)))


def test_adaptive_euler_refuses_non_positive_thresholds():
    with pytest.raises(ValueError, match="max_dgrad=0"):
        AdaptiveEuler(max_dgrad=0)


def test_only_the_driver_handles_checkpoints_progress_and_divergence_of_training_loops():
    """Checkpoint, progress and divergence handling of the training loops live in nn/driver.py alone: no other module
    of the library reads the checkpointer, reports progress or raises Diverged (the runtime installs checkpointers
    and listeners; nn/divergence.py defines Diverged and check_finite, a user's own loop's tool)."""
    from pathlib import Path

    import repdyn

    root = Path(repdyn.__file__).parent
    allowed = {
        "checkpoint.current(": {"nn/driver.py", "nn/checkpoint.py"},
        "Diverged(": {"nn/driver.py", "nn/divergence.py"},
        # critical.py's loop shoots exact critical networks, one per (draw, depth): no training, so no driver
        "report(": {"nn/driver.py", "nn/progress.py", "experiments/leaky_resnet/critical.py"},
    }
    found = {key: set() for key in allowed}
    for path in root.rglob("*.py"):
        name = path.relative_to(root).as_posix()
        if name.startswith(("runtime/", "report/", "monitor/", "cli.py")):
            continue
        text = path.read_text()
        for key in allowed:
            if key in text.replace(f"def {key}", "").replace(f"write_{key}", ""):
                found[key].add(name)
    for key, names in found.items():
        assert names <= allowed[key], (key, names - allowed[key])
