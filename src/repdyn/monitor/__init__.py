"""Diagnostics for any PyTorch training run: the theories of seeds 000-004 as instruments (:class:`Monitor`),
the recording it stores, the analysis against each theory and its HTML report (``repdyn analyze``)."""

from repdyn.monitor.analysis import Analysis, Sweep, analyze, tidy
from repdyn.monitor.integrations import hf_callback, lightning_callback
from repdyn.monitor.monitor import DEFAULT_MEASURES, MEASURES, IncompleteRecordingWarning, MeasureFailedWarning, Monitor
from repdyn.monitor.recording import Recording, load_recording
from repdyn.monitor.sinks import tensorboard_sink, wandb_sink
from repdyn.monitor.watching import Watched, default_layers, probe_from_loader, watch

__all__ = ["DEFAULT_MEASURES", "MEASURES", "Analysis", "IncompleteRecordingWarning", "MeasureFailedWarning", "Monitor",
           "Recording", "Sweep", "Watched", "analyze", "default_layers", "hf_callback", "lightning_callback",
           "load_recording", "probe_from_loader",
           "tensorboard_sink", "tidy", "wandb_sink", "watch"]
