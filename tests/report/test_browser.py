"""The report opens in real headless Chromium: claims table, every figure rendered, a screenshot saved."""

import json

import pytest

from repdyn.report.render import write_report
from repdyn.runtime.reproduce import analyse, execute, plan
from report_browser import check_report_in_browser


@pytest.mark.browser
def test_report_renders_in_chromium(tmp_path, browser):
    plan_ = plan(["fixture.least_squares"], scale="smoke", out=tmp_path / "out")
    execute(plan_)
    index = write_report(plan_.out, analyse(plan_), scale="smoke", seed=0, device="cpu")
    rows = check_report_in_browser(browser, index, tmp_path / "report.png")
    claims = json.loads((plan_.out / "claims.json").read_text())["claims"]
    assert rows == [{"claim": f"{c['experiment']}:{c['id']}", "status": "PASS"} for c in claims]
