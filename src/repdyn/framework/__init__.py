"""The experiment contract: an :class:`Experiment` declares its scales, runs and claims (:class:`ClaimSpec`, each
with its :class:`Control`, :class:`Precondition` or reason for none, optional :class:`NullEffect` and recorded
:class:`Disagreement`), its analysis returns :class:`Measured` values per seed, and :func:`evaluate` turns them into
a :class:`ClaimResult`. :class:`ExperimentOutcome` is one experiment's result as the report renders it. This
package depends on no other part of repdyn; runtime/ and report/ depend on it."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, names={
    **dict.fromkeys(["SCALES", "Analysis", "Experiment", "Paper", "RunSpec", "batch_label"], ".base"),
    **dict.fromkeys(["DECIDED", "INCONCLUSIVE", "NOT_REPRODUCED", "NO_EFFECT", "REPRODUCED", "SKIPPED", "UNDECIDED",
                     "VACUOUS", "VERDICTS", "ClaimResult", "ClaimSpec", "CloseTo", "Control", "Disagreement",
                     "Expectation", "Holds", "InRange", "Measured", "NullEffect", "Precondition", "at_least",
                     "at_most"], ".claims"),
    **dict.fromkeys(["CONFIDENCE", "Interval", "evaluate", "interval"], ".verdicts"),
    **dict.fromkeys(["ConfigError", "apply_overrides", "param", "validate"], ".config"),
    **dict.fromkeys(["RECORDS", "full_verdicts", "load_records"], ".records"),
    "ExperimentOutcome": ".outcome", "claims_figure": ".claims_figure",
})
