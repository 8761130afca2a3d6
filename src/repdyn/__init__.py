"""repdyn: dynamics of representation learning.

Five theories of training dynamics (seeds 000-004 in shared/seeds), the experiments that test them against real
networks, a one-command reproduction with a report of theory against experiment, and diagnostics for any
PyTorch model. See DESIGN.md for the layers.
"""

__version__ = "0.1.0"
