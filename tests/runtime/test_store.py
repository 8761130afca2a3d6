import numpy as np
import pytest

from repdyn.runtime.store import ResultStore, derive_seed, run_key


def test_write_read_round_trip_keeps_arrays_and_scalars(tmp_path):
    store = ResultStore(tmp_path)
    store.write("e", "k", {"a": np.arange(3.0), "x": 1.5, "n": 3, "s": "text", "flag": True}, {"status": "ok"})
    run = store.read("e", "k")
    np.testing.assert_array_equal(run.result["a"], np.arange(3.0))
    assert run.result["x"] == 1.5 and run.result["n"] == 3 and run.result["s"] == "text" and run.result["flag"]
    assert run.status == "ok" and not run.diverged


def test_no_partial_file_is_ever_visible(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write("e", "k", {"a": np.ones(2)}, {"status": "ok"})
    assert not store.has("e", "k") and list((tmp_path / "e").iterdir()) == []


def test_object_results_are_rejected(tmp_path):
    with pytest.raises(TypeError, match="'bad' is not an array"):
        ResultStore(tmp_path).write("e", "k", {"bad": {"nested": 1}}, {})


def test_keys_and_seeds_depend_on_every_input():
    base = run_key("e", {"a": 1}, "l", {"p": 1}, 0, "cpu")
    variants = [run_key("f", {"a": 1}, "l", {"p": 1}, 0, "cpu"), run_key("e", {"a": 2}, "l", {"p": 1}, 0, "cpu"),
                run_key("e", {"a": 1}, "m", {"p": 1}, 0, "cpu"), run_key("e", {"a": 1}, "l", {"p": 2}, 0, "cpu"),
                run_key("e", {"a": 1}, "l", {"p": 1}, 1, "cpu"), run_key("e", {"a": 1}, "l", {"p": 1}, 0, "cuda")]
    assert len({base, *variants}) == 7
    assert derive_seed(0, "e", "a") == derive_seed(0, "e", "a") != derive_seed(0, "e", "b")


def test_written_files_are_readable_by_others_like_a_plain_open(tmp_path):
    import os
    import stat

    path = ResultStore(tmp_path).write("e", "k", {"a": np.ones(1)}, {})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
