"""Diagnostics for any PyTorch training run: the theories of seeds 000-004 as instruments (:class:`Monitor`),
the recording it stores, the analysis against each theory and its HTML report (``repdyn analyze``)."""

from repdyn.monitor.analysis import Analysis, analyze
from repdyn.monitor.monitor import DEFAULT_MEASURES, MEASURES, IncompleteRecordingWarning, MeasureFailedWarning, Monitor
from repdyn.monitor.recording import Recording, load_recording
from repdyn.monitor.sinks import tensorboard_sink, wandb_sink

__all__ = ["DEFAULT_MEASURES", "MEASURES", "Analysis", "IncompleteRecordingWarning", "MeasureFailedWarning", "Monitor",
           "Recording",
           "analyze", "load_recording", "tensorboard_sink", "wandb_sink"]
