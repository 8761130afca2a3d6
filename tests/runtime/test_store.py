import os

import numpy as np
import pytest

from repdyn.runtime.store import CorruptRun, ResultStore, content_checksum, derive_seed, key_inputs, key_of, run_key


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


def test_every_run_carries_a_checksum_of_its_content(tmp_path):
    import json

    store = ResultStore(tmp_path)
    path = store.write("e", "k", {"a": np.arange(3.0)}, {"status": "ok", "seconds": 0.5})
    with np.load(path) as data:
        meta = json.loads(str(data["__meta__"]))
        assert meta["checksum"] == content_checksum({"a": data["a"]}, meta)
    assert store.read("e", "k").meta == {"status": "ok", "seconds": 0.5}
    meta["seconds"] = 0.25  # metadata is covered too
    np.savez(path, a=np.arange(3.0), __meta__=np.asarray(json.dumps(meta)))
    with pytest.raises(CorruptRun, match="does not match its checksum"):
        store.read("e", "k")
    del meta["checksum"]  # a file from before checksums, or a foreign one
    np.savez(path, a=np.arange(3.0), __meta__=np.asarray(json.dumps(meta)))
    with pytest.raises(CorruptRun, match="carries no checksum"):
        store.read("e", "k")
    assert store.verified("e", "k") is None and not store.has("e", "k")
    assert (tmp_path / ".quarantine" / "e" / "k.npz").is_file()
    assert store.verified("e", "k") is None  # nothing there: no second warning, nothing moved


def test_cleaning_spares_the_temporary_file_of_a_writer_at_work(tmp_path):
    store = ResultStore(tmp_path)
    (tmp_path / "e").mkdir()
    busy, stale = tmp_path / "e" / ".tmp-busykey-abc123.npz", tmp_path / "e" / ".tmp-stalekey-def456.npz"
    busy.write_bytes(b"half")
    stale.write_bytes(b"half")
    with store.lock("e", "busykey"):
        assert store.clean_temporaries() == 1
    assert busy.exists() and not stale.exists()


def test_a_keyed_store_holds_runs_whose_key_inputs_hash_to_their_key(tmp_path):
    store = ResultStore(tmp_path, keyed=True)
    inputs = key_inputs("e", {"n": 3}, "run=0", {"i": 0}, 7, "cpu")
    key = key_of(inputs)
    assert key == run_key("e", {"n": 3}, "run=0", {"i": 0}, 7, "cpu")
    store.write("e", key, {"a": np.arange(3.0)}, {"status": "ok", "key": inputs})
    assert store.read("e", key).meta["key"] == inputs
    with pytest.raises(ValueError, match="do not hash to its key"):
        store.write("e", "0" * 24, {"a": np.arange(3.0)}, {"status": "ok", "key": inputs})
    ResultStore(tmp_path).write("e", "1" * 24, {"a": np.arange(3.0)}, {"status": "ok"})  # no key inputs
    with pytest.raises(CorruptRun, match="does not record the inputs of its key"):
        store.read("e", "1" * 24)
    (tmp_path / "f").mkdir()
    os.replace(store.path("e", key), store.path("f", key))  # the right key in another experiment's folder
    with pytest.raises(CorruptRun, match="stored under another run's key"):
        store.read("f", key)
