"""Run every benchmark (benchmarks/bench_*.py) and rewrite BENCHMARKS.md with their sections.

Each benchmark's ``run() -> str`` runs in a fresh Python process, one after another, so that peak-memory figures
and thread settings of one benchmark do not leak into the next. The file starts with the machine (CPU model,
cores, load average, torch version, GPU if any), the date and the command. ``--only ode,ntk`` reruns some
benchmarks and replaces only their sections, keeping the others (each section records when it was measured).

    python benchmarks/run_all.py            # all of them (a few minutes on 2 cores)
    python benchmarks/run_all.py --only ode
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUT = HERE.parent / "BENCHMARKS.md"
ORDER = ("ensemble", "ntk", "sde", "ode", "reproduce")
"""Sections in the order of the benchmark issue; benchmarks not listed here follow, sorted by name."""
SECTION = re.compile(r"<!-- bench:(?P<name>\w+) -->\n(?P<body>.*?)<!-- /bench:(?P=name) -->\n", re.S)
_RUNNER = "import importlib.util, sys; spec = importlib.util.spec_from_file_location('bench', sys.argv[1]); " \
          "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); " \
          "section = module.run(); print('\\n@@section@@'); print(section)"


def discover() -> list[str]:
    names = [p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py")]
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(ORDER)), n))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    import numpy
    import scipy
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return (f"{cpu_model()}, {os.cpu_count()} cores ({torch.get_num_threads()} torch threads), GPU: {gpu}; "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, torch {torch.__version__},"
            f" NumPy {numpy.__version__}, SciPy {scipy.__version__}; load average at start {load}")


def run_benchmark(name: str) -> tuple[str, float, bool]:
    """(Markdown section, wall seconds, success) of benchmarks/bench_<name>.py, run in a fresh process."""
    path = HERE / f"bench_{name}.py"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(path)], capture_output=True, text=True,
                          cwd=HERE.parent)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or "@@section@@" not in done.stdout:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        return f"### {name}: FAILED (exit code {done.returncode})\n\n```\n{tail}\n```", seconds, False
    return done.stdout.split("@@section@@", 1)[1].strip(), seconds, True


def existing_sections(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {m["name"]: m["body"] for m in SECTION.finditer(path.read_text())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (ode, ntk, ...); others are kept as they are")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"file to rewrite [default: {OUTPUT.name}]")
    args = parser.parse_args(argv)
    names = discover()
    chosen = names
    if args.only:
        chosen = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in chosen if n not in names]
        if unknown:
            parser.error(f"unknown benchmark {', '.join(unknown)}: choose from {', '.join(names)}")
    sections = existing_sections(args.output)
    host, today = machine(), datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    failed = []
    for name in chosen:
        print(f"bench_{name} ...", file=sys.stderr, flush=True)
        body, seconds, ok = run_benchmark(name)
        if not ok:
            failed.append(name)
        sections[name] = f"{body}\n\n_Measured {today} in {seconds:.0f} s._\n"
        print(f"bench_{name}: {seconds:.0f} s{' FAILED' if name in failed else ''}", file=sys.stderr, flush=True)
    command = "python benchmarks/run_all.py" + (f" --only {args.only}" if args.only else "")
    header = [
        "# Benchmarks",
        "",
        "Written by `benchmarks/run_all.py`; do not edit by hand. Each section compares repdyn with its reference "
        "side by side, in one run on the same machine, and ends with the command that reproduces it.",
        "",
        f"- Machine: {host}",
        f"- Date: {today} (sections not rerun by the command below keep the date written under them)",
        f"- Command: `{command}` (`make bench` runs them all)",
        "",
        "",
    ]
    body = [f"<!-- bench:{name} -->\n{sections[name].rstrip()}\n<!-- /bench:{name} -->\n"
            for name in names if name in sections]
    args.output.write_text("\n".join(header) + "\n".join(body))
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
