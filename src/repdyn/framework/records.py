"""Recorded full-scale verdicts: what ``repdyn reproduce --scale full`` established, committed with the code.

One JSON file per paper, ``docs/reproduction/verdicts/full/<paper>.json`` (:data:`RECORDS`), written by
``repdyn record DIR`` (:mod:`repdyn.runtime.records`) from a finished full-scale reproduction. It holds every
claim's ``claims.json`` fields, the commit and date it was produced at, the machine, the CPU-seconds spent, and the
hash of each experiment's full config (:func:`config_hash`). A record whose hashes no longer match the code's full
configs is stale (:func:`stale`): the tests fail on it, so a changed full config cannot keep a verdict it did not
earn.

The quick report shows each claim's recorded full verdict beside its quick one; a claim declared ``full_only`` is
recorded ``undecided at quick`` and must be decided by its record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repdyn.framework.config import ConfigError, to_dict

RECORDS = Path(__file__).resolve().parents[3] / "docs" / "reproduction" / "verdicts" / "full"
"""Where the committed records live in a source checkout (absent in an installed wheel: no records are shown)."""

FORMAT = 1


def config_hash(config: Any) -> str:
    """SHA-256 (first 16 hex digits) of a config's every field, analysis-only ones included: a verdict depends on
    both how the runs were made and how they were judged."""
    return hashlib.sha256(json.dumps(to_dict(config), sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_records(folder: Path = RECORDS) -> dict[str, dict[str, Any]]:
    """paper -> its committed record (none where the folder is absent). A file that is not a record is an error
    naming it."""
    folder = Path(folder)
    records = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            record = json.loads(path.read_text())
            if record.get("format") != FORMAT or not isinstance(record.get("claims"), list):
                raise ValueError("not a full-verdict record")
        except (OSError, ValueError, AttributeError) as error:
            raise ConfigError(f"{path}: {error}") from None
        records[record["paper"]] = record
    return records


def full_verdicts(records: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(experiment, claim id) -> what the report shows of its full record: verdict, estimate, interval, date."""
    out = {}
    for record in records.values():
        for claim in record["claims"]:
            out[claim["experiment"], claim["id"]] = {
                "verdict": claim["verdict"], "estimate": claim["estimate"], "ci_low": claim["ci_low"],
                "ci_high": claim["ci_high"], "n_seeds": claim["n_seeds"], "date": record["date"],
                "commit": record["commit"], "paper": record["paper"]}
    return out


def stale(records: Mapping[str, Mapping[str, Any]], full_configs: Mapping[str, tuple[str, Any]]) -> list[str]:
    """Why each stale record is stale: an experiment whose full config changed since the record was made, one of
    the paper's that the record lacks, or one it names that no longer exists. ``full_configs``: experiment ->
    (its paper, its full config now)."""
    problems = []
    for paper, record in sorted(records.items()):
        recorded = record["config_hashes"]
        mine = {name for name, (owner, _) in full_configs.items() if owner == paper}
        for name in sorted(mine | set(recorded)):
            if name not in full_configs:
                problems.append(f"{paper}: {name} is recorded but no longer exists")
            elif name not in recorded:
                problems.append(f"{paper}: {name} has no recorded full verdicts")
            elif recorded[name] != config_hash(full_configs[name][1]):
                problems.append(f"{paper}: {name}'s full config changed (recorded {recorded[name]}, "
                                f"now {config_hash(full_configs[name][1])})")
    return problems
