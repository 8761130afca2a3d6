"""Every training loop moved onto :func:`repdyn.nn.driver.drive` returns what its former implementation returned,
bit for bit: tests/nn/former_loops/ holds, per loop, a small case and the former loop's outputs on it (make.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

HERE = Path(__file__).parent / "former_loops"
CASES = sorted(p.stem for p in HERE.glob("*.npz"))


def _case(name: str) -> dict[str, np.ndarray]:
    spec = importlib.util.spec_from_file_location(f"former_loop_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.case()


@pytest.mark.parametrize("name", CASES)
def test_the_loop_returns_its_former_outputs_bit_for_bit(name):
    torch.set_num_threads(1)
    found = _case(name)
    with np.load(HERE / f"{name}.npz") as former:
        assert sorted(found) == sorted(former.files)
        for key in former.files:
            assert (found[key].dtype, found[key].shape) == (former[key].dtype, former[key].shape), key
            assert found[key].tobytes() == former[key].tobytes(), key
