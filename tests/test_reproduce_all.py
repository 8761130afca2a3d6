"""Every registered experiment end to end at smoke scale, as `repdyn reproduce --scale smoke` runs it."""

from __future__ import annotations

import pytest

from repdyn.report.render import write_report
from repdyn.runtime import registry
from repdyn.runtime.reproduce import analyse, execute, plan
from report_browser import check_report_in_browser

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    plan_ = plan(None, scale="smoke", out=out)
    execute(plan_)
    outcomes = analyse(plan_)
    return write_report(out, outcomes, scale="smoke", seed=0, device="cpu"), outcomes


def test_every_experiment_is_analysed_and_measures_every_claim(smoke_report):
    _, outcomes = smoke_report
    assert {o.name for o in outcomes} == set(registry.all_experiments())
    assert {o.name: o.errors for o in outcomes if o.errors} == {}
    paper_experiments = [o for o in outcomes if not o.name.startswith("fixture.")]
    assert [o.name for o in paper_experiments if not o.figures and not all(c.skipped for c in o.claims)] == []
    unmeasured = [f"{c.experiment}:{c.id}" for o in outcomes for c in o.claims
                  if c.measured is None and not c.skipped and "diverged" not in c.note]
    assert unmeasured == []


@pytest.mark.browser
def test_the_report_renders_in_chromium(smoke_report, browser, tmp_path):
    index, outcomes = smoke_report
    rows = check_report_in_browser(browser, index, tmp_path / "reproduce.png")
    assert [row["claim"] for row in rows] == [f"{c.experiment}:{c.id}" for o in outcomes for c in o.claims]
