import gzip
import struct

import numpy as np
import pytest

from repdyn.data.mnist import load_mnist, read_idx


def write_idx(path, array, compress=False):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(payload)


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 7, dtype=np.uint8)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", images, compress=True)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    write_idx(tmp_path / "t10k-images.idx3-ubyte", images[:3])
    write_idx(tmp_path / "t10k-labels.idx1-ubyte", labels[:3])
    return tmp_path, images, labels


def test_reads_gz_and_raw_files(folder):
    path, images, labels = folder
    x, y = load_mnist(path)
    assert x.shape == (7, 784) and np.allclose(x * 255, images.reshape(7, -1))
    assert y.dtype == np.int64 and np.array_equal(y, labels)
    xt, yt = load_mnist(path, "test", flatten=False, scale=False, n=2)
    assert xt.shape == (2, 28, 28) and np.array_equal(xt, images[:2]) and np.array_equal(yt, labels[:2])


def test_clear_errors(folder, tmp_path_factory):
    path, images, labels = folder
    with pytest.raises(ValueError, match="split"):
        load_mnist(path, "validation")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mnist(path / "missing")
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path_factory.mktemp("empty"))
    with pytest.raises(ValueError, match="n="):
        load_mnist(path, n=100)
    bad = path / "bad"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="magic"):
        read_idx(bad)
    truncated = path / "truncated"
    truncated.write_bytes(struct.pack(">BBBBI", 0, 0, 8, 1, 10) + b"\x00" * 3)
    with pytest.raises(ValueError, match="announces"):
        read_idx(truncated)
    write_idx(path / "t10k-labels.idx1-ubyte", labels[:2])
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        load_mnist(path, "test")
