"""Checkpoint files hold data only and are checked before a run resumes from them: a checksum, a data-only read, and
the run they belong to."""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np
import pytest
import torch

from repdyn.nn.checkpoint import HEADER, Checkpointer, DamagedCheckpoint, read_checkpoint, write_checkpoint
from repdyn.nn.training import TrainResult
from repdyn.nn.trajectory import Trajectory


class Payload:
    """A pickle that runs a shell command when loaded with a plain unpickler."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def with_header(body: bytes) -> bytes:
    """What a careful attacker writes: a valid header and checksum in front of the payload."""
    return HEADER + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def test_a_checkpoint_round_trips_tensors_arrays_and_the_packages_dataclasses(tmp_path):
    result = TrainResult(Trajectory(np.arange(3), {"loss": np.ones((3, 2))}, 2), diverged_at=np.full(2, -1))
    state = {"step": 7, "weights": torch.arange(4.0), "rng": torch.get_rng_state(), "result": result,
             "diverged_at": np.array([3, -1]),
             "empty": np.zeros(0), "scalar": np.float32(2.5), "history": {"loss": [0.5, 0.25]}, "pair": (1, 2.5)}
    path = tmp_path / "abc.ckpt"
    write_checkpoint(path, "abc", {0: state})
    (loaded,) = read_checkpoint(path).values()
    assert loaded["step"] == 7 and loaded["history"] == {"loss": [0.5, 0.25]} and loaded["pair"] == (1, 2.5)
    assert torch.equal(loaded["weights"], state["weights"]) and torch.equal(loaded["rng"], state["rng"])
    np.testing.assert_array_equal(loaded["diverged_at"], [3, -1])
    assert loaded["empty"].shape == (0,) and loaded["scalar"] == 2.5 and type(loaded["scalar"]) is np.float32
    assert isinstance(loaded["result"], TrainResult)
    assert np.array_equal(loaded["result"].trajectory["loss"], np.ones((3, 2)))
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("header", [False, True])
def test_a_pickle_payload_executes_nothing(tmp_path, header):
    marker, path = tmp_path / "pwned", tmp_path / "abc.ckpt"
    buffer = io.BytesIO()
    torch.save({"run": "abc", "loops": {0: {"x": Payload(marker)}}}, buffer)
    path.write_bytes(with_header(buffer.getvalue()) if header else buffer.getvalue())
    reason = "names the global posix.system" if header else "no checksum header"
    with pytest.raises(DamagedCheckpoint, match=reason):
        read_checkpoint(path)
    seen = []
    checkpointer = Checkpointer(path, every=0.0, damaged=seen.append)  # the runtime quarantines it here
    assert checkpointer.load(0) is None and len(seen) == 1 and reason in seen[0].reason
    assert not marker.exists()


def test_a_damaged_or_foreign_checkpoint_is_refused_with_its_reason(tmp_path):
    path = tmp_path / "abc.ckpt"
    write_checkpoint(path, "abc", {0: {"w": torch.ones(8)}})
    data = bytearray(path.read_bytes())
    data[-40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedCheckpoint, match="does not match its checksum"):
        read_checkpoint(path)
    write_checkpoint(tmp_path / "other.ckpt", "other", {0: {"w": torch.ones(8)}})
    os.replace(tmp_path / "other.ckpt", path)  # another run's checkpoint under this run's name
    with pytest.raises(DamagedCheckpoint, match="is the checkpoint of run 'other', not of 'abc'"):
        read_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(DamagedCheckpoint, match="no checksum header"):
        Checkpointer(path, every=0.0)  # without a damaged callback it is raised
