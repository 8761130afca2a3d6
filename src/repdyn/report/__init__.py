"""The HTML report of a reproduction (self-contained, offline), with claims.json and the metrics tables beside it,
rendered from :class:`repdyn.framework.ExperimentOutcome` objects."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, names={"write_report": ".render"})
