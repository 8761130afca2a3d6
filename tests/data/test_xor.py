import torch

from repdyn.data.xor import xor_data


def test_xor_table():
    x, y = xor_data()
    assert x.tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]
    expected = (x[:, 0] != x[:, 1]).to(y.dtype)
    assert torch.equal(y[:, 0], expected)
    assert x.dtype == torch.float64
