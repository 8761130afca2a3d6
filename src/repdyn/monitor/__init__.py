"""Diagnostics for any PyTorch training run: the theories of seeds 000-004 as instruments (:class:`Monitor`),
the recording it stores, the analysis against each theory and its HTML report (``repdyn analyze``)."""

from repdyn.monitor.monitor import DEFAULT_MEASURES, MEASURES, Monitor
from repdyn.monitor.recording import Recording, load_recording

__all__ = ["DEFAULT_MEASURES", "MEASURES", "Monitor", "Recording", "load_recording"]
