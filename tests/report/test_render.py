import json

import pandas as pd

from repdyn.framework.claims import ClaimSpec, Control, InRange
from repdyn.framework.outcome import ExperimentOutcome
from repdyn.framework.verdicts import evaluate
from repdyn.report.render import write_report

CLAIM = ClaimSpec("c", "a <b>statement</b>", "seed 000, Eq. 7", InRange(0, 1), quote="the paper's <i>words</i>",
                  band_reason="read off Fig. 2", control=Control("untrained", {"steps": 0}))


def outcome(name: str, metrics: list[dict], values: list[float]) -> ExperimentOutcome:
    claim = evaluate(name, CLAIM, values, control=[3.0, 4.0, 5.0])
    return ExperimentOutcome(name, "Title", "000", "Fig. 2", {"width": 3}, [claim], {"claims": b"\x89PNG"}, metrics,
                             [{"label": "r", "status": "ok", "seconds": 0.1, "step": None}], notes="why")


def test_report_files_escape_html_and_keep_mixed_metrics(tmp_path):
    index = write_report(tmp_path, [outcome("a.x", [{"v": 1.0}], [0.2, 0.3, 0.4]),
                                    outcome("b.y", [{"v": "text"}], [2.0, 2.5, 3.0])],
                         scale="smoke", seed=3, device="cpu")
    html = index.read_text()
    assert "a &lt;b&gt;statement&lt;/b&gt;" in html and "the paper&#39;s &lt;i&gt;words&lt;/i&gt;" in html
    assert "1 claim(s) differ from the verdict recorded in code" in html and "why" in html
    assert "fails as it should" in html and "read off Fig. 2" in html and 'id="a.x-fig-claims"' in html
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert claims["verdicts"] == {"reproduced": 1, "not reproduced": 1, "not reproduced (no effect)": 0,
                                  "inconclusive": 0, "undecided": 0, "vacuous": 0, "skipped": 0}
    first = claims["claims"][0]
    assert (first["estimate"], first["ci_low"], first["ci_high"], first["n_seeds"]) == (0.3, 0.2, 0.4, 3)
    assert (first["control_value"], first["verdict"], first["quote"]) == (4.0, "reproduced", "the paper's <i>words</i>")
    frame = pd.read_parquet(tmp_path / "metrics.parquet")
    assert list(frame["experiment"]) == ["a.x", "b.y"] and list(frame["v"]) == ["1.0", "text"]
    assert list(pd.read_csv(tmp_path / "metrics.csv")["v"]) == ["1.0", "text"]


def test_the_claims_figure_draws_seeds_that_could_not_be_measured():
    from repdyn.framework.claims_figure import claims_figure

    claims = [evaluate("e", CLAIM, [0.1, float("nan"), 0.2], control=[float("inf"), 1.0, 1.0]),
              evaluate("e", CLAIM, [0.1, float("inf"), 0.2], control=[3.0, 4.0, 5.0])]
    figure = claims_figure(claims)
    assert len([axes for axes in figure.axes if axes.get_visible()]) == 2
    figure.savefig(__import__("io").BytesIO(), format="png")
