"""repdyn: dynamics of representation learning.

Five theories of training dynamics (seeds 000-004 in shared/seeds), the experiments that test them against real
networks, a one-command reproduction with a report of theory against experiment, and diagnostics for any
PyTorch model. See DESIGN.md for the layers.
"""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``repdyn.Monitor`` and ``repdyn.analyze``, imported on first use so that ``import repdyn`` stays cheap."""
    if name == "Monitor":
        from repdyn.monitor import Monitor

        return Monitor
    if name == "analyze":
        from repdyn.monitor.analysis import analyze

        return analyze
    raise AttributeError(f"module 'repdyn' has no attribute {name!r}")
