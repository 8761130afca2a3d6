"""CIFAR-10 python-batch reader: real format round trip and refusal of a malicious pickle."""

import pickle
import subprocess
import sys

import numpy as np
import pytest

from repdyn.data import cifar10


def _write_batch(path, data, labels, protocol=2):
    batch = {b"batch_label": b"training batch", b"labels": list(map(int, labels)), b"data": data,
             b"filenames": [f"img{i}.png".encode() for i in range(len(labels))]}
    with open(path, "wb") as fh:
        pickle.dump(batch, fh, protocol=protocol)


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    for name in (*cifar10.TRAIN_FILES, cifar10.TEST_FILE):
        labels = np.arange(20) % 10
        _write_batch(tmp_path / name, rng.integers(0, 256, (20, 3072), dtype=np.uint8), labels)
    return tmp_path


def test_reads_real_format_and_builds_subset(folder):
    x, y = cifar10.read_batch(folder / "data_batch_1")
    assert x.shape == (20, 3, 32, 32) and x.dtype == np.uint8
    np.testing.assert_array_equal(y, np.arange(20) % 10)
    with open(folder / "data_batch_1", "rb") as fh:
        raw = pickle.load(fh, encoding="bytes")[b"data"]
    np.testing.assert_array_equal(x[3, 1], raw[3, 1024:2048].reshape(32, 32))
    xt, yt, xv, yv = cifar10.cifar_subset(folder, 3, 7, 4, np.random.default_rng(1))
    assert xt.shape == (21, 3, 32, 32) and xv.shape == (12, 3, 32, 32)
    np.testing.assert_array_equal(np.bincount(yt), [7, 7, 7])
    assert xt.min() >= -1.0 and xt.max() <= 1.0
    np.testing.assert_allclose(cifar10.normalise(np.array([0, 255], dtype=np.uint8)), [-1.0, 1.0])


class _Exploit:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned > /dev/null",))


def test_malicious_pickle_is_refused(tmp_path):
    path = tmp_path / "data_batch_1"
    with open(path, "wb") as fh:
        pickle.dump({b"data": _Exploit(), b"labels": [0]}, fh, protocol=2)
    with pytest.raises(cifar10.CifarFormatError, match="refusing to load global"):
        cifar10.read_batch(path)


def test_wrong_structure_and_missing_folder(tmp_path):
    path = tmp_path / "bad"
    with open(path, "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 10), dtype=np.uint8), b"labels": [0, 1]}, fh, protocol=2)
    with pytest.raises(cifar10.CifarFormatError, match="3072"):
        cifar10.read_batch(path)
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py"):
        cifar10.load_cifar10(tmp_path)


def test_check_cifar10_folder_accepts_a_good_folder(folder):
    cifar10.check_cifar10_folder(folder)


def test_check_cifar10_folder_names_what_is_wrong(folder, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cifar10.check_cifar10_folder(folder / "missing")
    (folder / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="lacks data_batch_3: point it at 'cifar-10-batches-py'"):
        cifar10.check_cifar10_folder(folder)
    (folder / "data_batch_3").write_bytes(b"GIF89a not a pickle")
    with pytest.raises(cifar10.CifarFormatError, match="data_batch_3 is not a CIFAR-10 python batch"):
        cifar10.check_cifar10_folder(folder)
    with open(folder / "data_batch_1", "wb") as fh:
        pickle.dump({b"data": _Exploit(), b"labels": [0]}, fh, protocol=2)
    with pytest.raises(cifar10.CifarFormatError, match="data_batch_1: refusing to load global"):
        cifar10.check_cifar10_folder(folder)


@pytest.mark.parametrize("damage", ["empty", "malicious"])
def test_a_wrong_or_malicious_cifar_folder_is_rejected_at_planning_with_exit_2(folder, tmp_path_factory, cli_env,
                                                                                damage):
    if damage == "empty":
        folder = tmp_path_factory.mktemp("empty")
        expected = f"CIFAR-10 folder {folder} lacks data_batch_1, data_batch_2"
    else:
        with open(folder / "data_batch_1", "wb") as fh:
            pickle.dump({b"data": _Exploit(), b"labels": [0]}, fh, protocol=2)
        expected = f"{folder / 'data_batch_1'}: refusing to load global posix.system from a CIFAR-10 batch"
    out = tmp_path_factory.mktemp("cli") / "out"
    done = subprocess.run([sys.executable, "-m", "repdyn", "run", "elastic_sde.cifar", "--scale", "smoke", "--set",
                           f"data_dir={folder}", "--out", str(out)], capture_output=True, text=True, env=cli_env,
                          timeout=300)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: elastic_sde.cifar: data_dir='{folder}': {expected}")
    assert not out.exists()
