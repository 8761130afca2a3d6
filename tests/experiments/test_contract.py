"""The experiment contract (DESIGN.md), checked over the whole registry: every claim quotes its paper verbatim and
says why its band is what it is; every claim about training declares a negative control; scales are data whose
paper scale is the config's defaults; a topic is a package; and every experiment runs at smoke scale with its
controls, each claim getting a verdict; every claim declares the trained state it is about (or why none); and the
committed full-scale records are current and decide every claim they hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from repdyn.framework.base import SCALES
from repdyn.framework.claims import DECIDED
from repdyn.framework.records import RECORDS, load_records, stale
from repdyn.report.render import write_report
from repdyn.runtime import registry
from repdyn.runtime.reproduce import analyse, execute, plan
from report_browser import check_report_in_browser

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
EXPERIMENTS = [e for e in registry.all_experiments().values() if not e.name.startswith("fixture")]
CLAIMS = [(e, c) for e in EXPERIMENTS for c in e.claims]


def _topic(experiment) -> str:
    return experiment.name.split(".")[0]


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def missing_pieces(quote: str, paper: str) -> list[str]:
    """The pieces of ``quote`` (split at "…", which may stand for a garbled formula) not found in ``paper``."""
    pieces = [normalise(piece) for piece in re.split(r"…|\.\.\.", quote)]
    return [piece for piece in pieces if piece and piece not in paper]


def test_missing_pieces_finds_verbatim_text_across_line_breaks_and_ellipses():
    paper = normalise("We show that the\nrepresentation  aligns, and X = f(y) holds for all y.")
    assert missing_pieces("We show that the representation aligns", paper) == []
    assert missing_pieces("we show that … holds for all y", paper) == []
    assert missing_pieces("We show that the representation diverges", paper) == [
        "we show that the representation diverges"]


@pytest.fixture(scope="module")
def papers() -> dict[str, str]:
    if not SEEDS.is_dir():
        pytest.skip(f"the papers' text is not here ({SEEDS}): the quotes cannot be checked")
    return {path.name[:3]: normalise(path.read_text()) for path in SEEDS.glob("*.txt")}


@pytest.mark.parametrize(("experiment", "claim"), [pytest.param(e, c, id=f"{e.name}:{c.id}") for e, c in CLAIMS])
def test_every_claim_quotes_its_paper_and_gives_its_reasons(experiment, claim, papers):
    assert claim.quote, "no quote of the paper"
    assert missing_pieces(claim.quote, papers[experiment.paper]) == []
    assert claim.band_reason, "no reason for the band"
    assert claim.exact or claim.control is not None or claim.no_control, \
        "a claim about training needs a control, or the reason why none applies"
    assert bool(claim.preconditions) != bool(claim.no_precondition.strip()), \
        "a claim declares the trained state it is about (preconditions), or why it needs none (no_precondition)"


def test_at_most_15_percent_of_claims_are_decided_at_full_only_and_their_records_decide_them():
    full_only = [(e, c) for e, c in CLAIMS if c.full_only]
    assert len(full_only) <= 0.15 * len(CLAIMS), f"{len(full_only)} of {len(CLAIMS)} claims are full-only"
    recorded = {(claim["experiment"], claim["id"]): claim["verdict"]
                for record in load_records(RECORDS).values() for claim in record["claims"]}
    undecided = [f"{e.name}:{c.id}" for e, c in full_only if recorded.get((e.name, c.id)) not in DECIDED]
    assert undecided == [], "a claim undecided at quick must be decided by its committed full record"


def test_committed_full_records_are_current_and_agree_with_the_code():
    """A record made at another full config is stale; its verdicts are the ones the code records."""
    records = load_records(RECORDS)
    assert stale(records, {e.name: (e.paper, e.config("full")) for e in EXPERIMENTS}) == []
    specs = {(e.name, c.id): c for e, c in CLAIMS}
    for record in records.values():
        assert {(c["experiment"], c["id"]) for c in record["claims"]} == \
            {key for key in specs if registry.get(key[0]).paper == record["paper"]}
        # a decided full verdict must be the one recorded in code; an inconclusive one (more seeds needed) keeps its
        # paper's work open, and the quick run exits 1 on that claim as long as it stays so
        differ = [f"{c['experiment']}:{c['id']} {c['verdict']}" for c in record["claims"]
                  if c["verdict"] not in (specs[c["experiment"], c["id"]].recorded, "skipped", "inconclusive")]
        assert differ == [], "the record's verdict differs from the one recorded in code"


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda e: e.name)
def test_scales_are_data_and_the_defaults_are_the_papers_settings(experiment):
    assert set(experiment.scales) == set(SCALES)
    assert experiment.scales["paper"] == experiment.Config()
    module = type(experiment).__module__
    assert module.startswith(f"repdyn.experiments.{_topic(experiment)}.") and module.count(".") == 3, \
        "a topic is a package with one module per experiment"


def test_every_paper_has_its_record():
    assert sorted(registry.all_papers()) >= ["000", "001", "002", "003", "004"]
    assert {e.paper for e in EXPERIMENTS} <= set(registry.all_papers())


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_scale_runs_with_controls_and_every_claim_gets_a_verdict(experiment, tmp_path, browser):
    plan_ = plan([experiment.name], scale="smoke", out=tmp_path / "out")
    execute(plan_)
    (outcome,) = analyse(plan_)
    assert outcome.errors == []
    if all(c.skipped for c in outcome.claims):
        return
    index = write_report(plan_.out, [outcome], scale="smoke", seed=0, device="cpu")
    rows = check_report_in_browser(browser, index, tmp_path / "report.png")
    assert [(row["claim"], row["verdict"]) for row in rows] == [(f"{c.experiment}:{c.id}", c.verdict)
                                                                for c in outcome.claims]
    assert outcome.figures, "no figure"
    unmeasured = [c.id for c in outcome.claims if c.estimate is None and "diverged" not in c.note and not c.full_only]
    assert unmeasured == []
    unstated = [f"{c.id}: {p['quantity']}" for c in outcome.claims if c.estimate is not None
                for p in c.preconditions if not p["values"]]
    assert unstated == [], "a precondition's quantity was not measured (Analysis.states)"
    specs = {spec.id: spec for spec in experiment.claims}
    uncontrolled = [c.id for c in outcome.claims
                    if specs[c.id].control is not None and c.control_verdict in ("", "not measured")]
    assert uncontrolled == [], "a declared control did not run or measured nothing"


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_scale_runs_end_to_end_on_cuda(experiment, tmp_path):
    """``--device cuda``: the same runs on the accelerator, analysed into a verdict for every claim."""
    plan_ = plan([experiment.name], scale="smoke", device="cuda", out=tmp_path / "out")
    execute(plan_)
    (outcome,) = analyse(plan_)
    assert outcome.errors == []
    assert all(c.skipped or c.estimate is not None or "diverged" in c.note for c in outcome.claims)
