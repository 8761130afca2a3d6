"""The teacher tasks of seed 002 (App. B): a known bottleneck rank k*, normalised data, reproducible."""

import pytest
import torch

from repdyn.data.teacher import bottleneck_teacher, teacher_network


@pytest.mark.parametrize("kind", ["fcnn", "resnet"])
def test_teacher_jacobian_has_the_bottleneck_rank(kind):
    # f* = g_2 o g_1 through an inner dimension k*: its Jacobian has rank k* at a generic input.
    dims = (8, 3, 7) if kind == "fcnn" else (8, 4, 2, 7)
    teacher = teacher_network(dims, torch.Generator().manual_seed(0), kind=kind, hidden=16)
    for seed in range(3):
        x = torch.randn(8, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        jac = torch.autograd.functional.jacobian(lambda v: teacher(v[None])[0], x)
        s = torch.linalg.svdvals(jac)
        assert (s > 1e-10 * s[0]).sum().item() == min(dims[1:-1])


def test_task_is_normalised_reproducible_and_split():
    make = lambda seed: bottleneck_teacher((6, 2, 5), 30, 20, torch.Generator().manual_seed(seed), hidden=8)  # noqa: E731
    task = make(3)
    assert task.x_train.shape == (30, 6) and task.y_test.shape == (20, 5) and task.bottleneck_rank == 2
    for a, b in ((task.x_train, task.x_test), (task.y_train, task.y_test)):
        both = torch.cat([a, b])
        torch.testing.assert_close(both.mean(0), torch.zeros(both.shape[1], dtype=both.dtype), atol=1e-12, rtol=0)
        torch.testing.assert_close(both.std(0), torch.ones(both.shape[1], dtype=both.dtype))
    torch.testing.assert_close(make(3).y_train, task.y_train, rtol=0, atol=0)
    assert not torch.allclose(make(4).y_train, task.y_train)


def test_bad_arguments_raise():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="kind='cnn'"):
        bottleneck_teacher((4, 2, 4), 10, 10, g, kind="cnn")
    with pytest.raises(ValueError, match="dims"):
        bottleneck_teacher((4, 4), 10, 10, g)
    with pytest.raises(ValueError, match="n_train"):
        bottleneck_teacher((4, 2, 4), 1, 10, g)
