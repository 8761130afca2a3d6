"""examples/leaky_resnet_stationarity.py at reduced steps: Newton reaches a critical point of the softplus
Leaky ResNet but stalls on the ReLU one (the evidence behind the stationarity notes of seed 002)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "leaky_resnet_stationarity.py"


def test_newton_reaches_stationarity_with_softplus_but_not_with_relu():
    spec = importlib.util.spec_from_file_location("leaky_resnet_stationarity", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    results = module.main(["--adam-steps", "1500", "--newton-steps", "120"])
    relu, smooth = results["relu"], results["softplus"]
    assert smooth["gradient"] < 1e-10 and smooth["min_hessian_eigenvalue"] > 0
    assert relu["gradient"] > 1e-3 and relu["median_stationarity_residual"] > 0.1
