"""Write ``<name>.npz`` beside this file from ``case()`` of ``<name>.py``, run with the repdyn on the path.

Each module here defines ``case()``, a small run through one training loop's public function returning named arrays;
``<name>.npz`` holds what the loop returned before it was moved onto :func:`repdyn.nn.driver.drive`, and
``tests/nn/test_former_loops.py`` asserts that today's loop returns the same arrays bit for bit.

Usage, with ``<checkout>`` the commit whose loop is the reference:
``PYTHONPATH=<checkout>/src python tests/nn/former_loops/make.py NAME [NAME ...]``. The cases import the loops
from today's modules; at a checkout whose loops live in other modules, point the case's imports at those first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

HERE = Path(__file__).parent


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"former_loop_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(name: str) -> Path:
    torch.set_num_threads(1)
    path = HERE / f"{name}.npz"
    np.savez_compressed(path, **load(name).case())
    return path


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(write(name))
