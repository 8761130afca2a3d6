"""repdyn: dynamics of representation learning.

Five theories of training dynamics (seeds 000-004 in shared/seeds), the experiments that test them against real
networks, a one-command reproduction with a report of theory against experiment, and diagnostics for any
PyTorch model. See DESIGN.md for the layers.

The public API, each name imported on first use so that ``import repdyn`` stays cheap:

- diagnostics on your own training: :class:`Monitor`, :func:`watch`, :func:`analyze`, and the measures as
  functions :func:`effective_rank`, :func:`nc1`, :func:`ntk_alignment`, :func:`two_point_rates`;
- the reproduction: :func:`plan` (validate, write nothing), :func:`execute` (run what is not stored),
  :func:`analyse` (judge every claim), :func:`reproduce` (execute with each analysis as soon as its runs are in),
  :func:`write_report`;
- the theories' maths by topic: :mod:`repdyn.theory` (``repdyn.theory.effective_theory``, ``shallow_relu``,
  ``leaky_resnet``, ``compression``, ``elastic_sde``);
- the packages by layer (DESIGN.md): ``theory``, ``data``, ``nn``, ``probes``, ``framework``, ``experiments``,
  ``runtime``, ``report``, ``monitor``.
"""

from repdyn._lazy import attach

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = attach(__name__, submodules=[
    "data", "experiments", "framework", "monitor", "nn", "probes", "report", "runtime", "theory"], names={
    "Monitor": ".monitor.monitor", "analyze": ".monitor.analysis", "watch": ".monitor.watching",
    "effective_rank": ".monitor.functions", "nc1": ".monitor.functions", "ntk_alignment": ".monitor.functions",
    "two_point_rates": ".monitor.functions",
    "plan": ".runtime.reproduce", "execute": ".runtime.reproduce", "analyse": ".runtime.reproduce",
    "reproduce": ".runtime.reproduce", "write_report": ".report.render",
})
