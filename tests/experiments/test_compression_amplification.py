"""amplification (seed 003, Fig. 5): the controls skip the drawn-only further d; the paper scale follows Λ(t) to
zero loss while the quick scale stops just after t*."""

from __future__ import annotations

from repdyn.experiments.compression import EXPERIMENTS
from repdyn.runtime.reproduce import control_config, controls_of

EXP = next(e for e in EXPERIMENTS if e.name == "compression.amplification")


def test_controls_do_not_repeat_the_drawn_only_dimension() -> None:
    paper = EXP.config("paper")
    labels = [r.label for r in EXP.runs(paper)]
    assert len(labels) == 18 and sum("d=10" in label for label in labels) == 6
    controls = controls_of(EXP)
    assert len(controls) == 2
    for control in controls:
        runs = EXP.runs(control_config(paper, control))
        assert len(runs) == 12 and not any("d=10" in r.label for r in runs)  # 12 runs saved at paper scale
    quick = EXP.config("quick")
    for control in controls:  # the quick controls run what they ran before: every quick run, at the changed α/steps
        assert [r.label for r in EXP.runs(control_config(quick, control))] == [r.label for r in EXP.runs(quick)]


def test_paper_scale_follows_the_fitting_regime_and_quick_stops_after_t_star() -> None:
    assert EXP.config("paper").stop_fraction == 1.0
    assert EXP.config("quick").stop_fraction == 0.15
    assert set(EXP.config("paper").drawn_ps) <= set(EXP.config("paper").p_stripe)  # Fig. 5 top's p = 411, 4640
