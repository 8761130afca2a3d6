"""repdyn: dynamics of representation learning.

Five theories of training dynamics (seeds 000-004 in shared/seeds), the experiments that test them against real
networks, a one-command reproduction with a report of theory against experiment, and diagnostics for any
PyTorch model. See DESIGN.md for the layers.
"""

__version__ = "0.1.0"


_LAZY = {"Monitor": "repdyn.monitor.monitor", "analyze": "repdyn.monitor.analysis", "watch": "repdyn.monitor.watching",
         "effective_rank": "repdyn.monitor.functions", "nc1": "repdyn.monitor.functions",
         "ntk_alignment": "repdyn.monitor.functions", "two_point_rates": "repdyn.monitor.functions"}


def __getattr__(name: str) -> object:
    """``repdyn.Monitor``, ``repdyn.watch``, ``repdyn.analyze`` and the functions ``effective_rank``, ``nc1``,
    ``ntk_alignment``, ``two_point_rates``, imported on first use so that ``import repdyn`` stays cheap."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'repdyn' has no attribute {name!r}")
