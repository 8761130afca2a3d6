"""Run a computation in a fresh interpreter under an address-space cap (RLIMIT_AS) and say whether it fits: the
memory-setting tests compare a bounded and an unbounded setting this way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import resource, sys
{setup}
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + {headroom}, vm + {headroom}))
try:
{call}
except (MemoryError, RuntimeError):
    print("out of memory")
else:
    print("fits")
"""


def outcome_under_cap(folder: Path, setup: str, call: str, headroom: int, arg: str, *, timeout: float = 300) -> str:
    """Run ``setup`` (imports, inputs: uncapped), cap the address space at what the process then maps plus
    ``headroom`` bytes, run ``call`` (one or more lines; ``sys.argv[1]`` is ``arg``) and return "fits" or
    "out of memory". One torch thread."""
    script = folder / "cap.py"
    body = "\n".join("    " + line for line in call.strip().splitlines())
    script.write_text(SCRIPT.format(setup=setup.strip(), headroom=headroom, call=body))
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(script), arg], capture_output=True, text=True, env=environment,
                          check=True, timeout=timeout).stdout.strip()
