"""Seed 000: the authors' Eq. 7 fit and repdyn's on the same stored two-point trajectories.

Reads trajectories from file, either a run of repdyn's store (``OUT/runs/effective_theory.init_scale/<key>.npz``:
every member at ``--gain``) or the ``trial<k>.npz`` files of ``authors_two_point.py --out DIR`` (the first recorded
layer), and fits each twice: with the authors' ``simulate.optimize_eta`` from a checkout (``--authors PATH``; 100
log-spaced scales on the ratio u∞²/(XY), then unconstrained BFGS on (η_h, η_y), their time grid
``linspace(0, n, n)``) and with repdyn's ``common.fit_member`` (positive rates only). Time is the record index for
both, so the rates are per recorded interval. Per trajectory one JSON line: u(0), u(∞), v(0), the ratio that Eq. 10
needs for the measured end state, both fits' rates and normalised Eq. 49 losses, and for a repdyn run the relative
Eq. 9 loss error (``common.loss_fit``) with each fit's rates where they are positive.

    python docs/reproduction/scripts/authors_fit.py --authors PATH FILE.npz [FILE.npz ...] [--gain 1.3]

numba (which their simulate.py imports) is replaced by a no-op ``njit`` when it is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import numpy as np
from universality_checkout import use_checkout


def trajectories(path: Path, gain: float) -> list[dict]:
    """(label, u, v, w, loss, ybar0) of every trajectory in ``path``; ybar0 is None for the authors' files."""
    data = np.load(path, allow_pickle=True)
    if "gains" in data.files:  # a repdyn store run: u is (T, members, layers)
        members = np.nonzero(np.isclose(data["gains"], gain))[0]
        if members.size == 0:
            raise SystemExit(f"error: {path} has no member at gain {gain:g} (gains: {sorted(set(data['gains']))})")
        return [{"label": f"{path.name}:{j}", "u": data["u"][:, j, 0], "v": data["v"][:, j], "w": data["w"][:, j],
                 "loss": data["loss"][:, j], "ybar0": float(data["ybar"][0, j])} for j in members]
    if not {"t", "u", "v", "w", "loss"} <= set(data.files):
        raise SystemExit(f"error: {path} is neither a repdyn run nor an authors_two_point.py trial file")
    return [{"label": path.name, "u": data["u"][:, 0], "v": data["v"], "w": data["w"], "loss": data["loss"],
             "ybar0": None}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="checkout of loekvanrossem/universality")
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--gain", type=float, default=1.3, help="members of a repdyn run at this gain")
    parser.add_argument("--dx2", type=float, default=1.0, help="X (the code's data: 1)")
    parser.add_argument("--dy2", type=float, default=0.5, help="Y (the code's data: 0.5)")
    args = parser.parse_args()
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    use_checkout(args.authors)
    import simulate

    from repdyn.experiments.effective_theory.common import fit_member, loss_fit, relative_fit_loss, target_mean
    from repdyn.theory import effective_theory as et

    X, Y = args.dx2, args.dy2
    m = target_mean(Y**0.5)
    for path in args.files:
        for traj in trajectories(path, args.gain):
            u, v, w, loss = traj["u"], traj["v"], traj["w"], traj["loss"]
            n = u.size
            t = np.arange(n, dtype=float)
            denominator = X * Y - u[-1] * X * v[0] / u[0]
            out = {"trajectory": traj["label"], "u0": float(u[0]), "u_final": float(u[-1]), "v0": float(v[0]),
                   "eq10_ratio": float((u[-1] ** 2 - u[0] * u[-1]) / denominator) if denominator else None}
            ours = fit_member(t, u, v, w, X, Y)
            out["repdyn_rates"] = [ours.fit.rate_h, ours.fit.rate_y] if ours.fit else ours.error
            out["repdyn_fit_loss"] = ours.relative_loss
            with contextlib.redirect_stdout(io.StringIO()):  # it prints "Loss: ..."
                eta_h, eta_y, _ = simulate.optimize_eta(u, v, w, X, Y, guesses=np.logspace(-6, 2, 100))
            out["their_rates"] = [float(eta_h), float(eta_y)]
            grid = np.linspace(0, n, n)  # their time axis
            theirs = None
            if eta_h > 0 and eta_y > 0:
                theirs = et.integrate_dynamics((u[0], v[0], w[0]), X, Y, eta_h, eta_y, grid)
                out["their_fit_loss"] = relative_fit_loss(theirs, grid, u, v, w)
            if traj["ybar0"] is not None:
                for name, theory, time in (("repdyn", ours.fit.theory if ours.fit else None, t),
                                           ("their", theirs, grid)):
                    if theory is not None:
                        try:
                            out[f"{name}_eq9_error"] = loss_fit(time, loss, traj["ybar0"], m, theory, Y)[1]
                        except et.FitError as err:
                            out[f"{name}_eq9_error"] = str(err)
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
