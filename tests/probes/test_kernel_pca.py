import pytest
import torch

from repdyn.probes import kernel_pca


def test_kernel_pca_reconstructs_gram_and_projects_labels():
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(12, 5, generator=g, dtype=torch.float64)
    gram = feats @ feats.T
    y = torch.sign(torch.randn(12, generator=g, dtype=torch.float64))
    pca = kernel_pca(gram, y)
    p = 12
    assert torch.all(pca.eigenvalues[:-1] >= pca.eigenvalues[1:])
    torch.testing.assert_close(p * pca.eigenvectors @ torch.diag(pca.eigenvalues) @ pca.eigenvectors.T, gram)
    torch.testing.assert_close(pca.fractions.sum(), torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(pca.projections.pow(2), pca.fractions)  # ±1 labels: ω_r² = fraction
    torch.testing.assert_close((pca.eigenfunctions.pow(2)).mean(0), torch.ones(p, dtype=torch.float64))


def test_label_kernel_puts_everything_on_first_mode():
    y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0], dtype=torch.float64)
    pca = kernel_pca(torch.outer(y, y), y)
    torch.testing.assert_close(pca.eigenvalues[0], torch.tensor(1.0, dtype=torch.float64))  # ‖y‖²/p
    torch.testing.assert_close(pca.fractions[0], torch.tensor(1.0, dtype=torch.float64))


def test_top_modes_equal_the_leading_pairs_of_the_whole_decomposition():
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(40, 60, generator=g, dtype=torch.float64)
    gram = feats @ feats.T / 60
    y = torch.sign(torch.randn(40, generator=g, dtype=torch.float64))
    whole, top = kernel_pca(gram, y), kernel_pca(gram, y, modes=6)
    assert top.eigenvectors.shape == (40, 6) and top.fractions.shape == (6,)
    torch.testing.assert_close(top.eigenvalues, whole.eigenvalues[:6], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(top.fractions, whole.fractions[:6], rtol=1e-10, atol=1e-14)
    signs = torch.sign((top.eigenvectors * whole.eigenvectors[:, :6]).sum(0))  # each vector up to its sign
    torch.testing.assert_close(top.eigenvectors * signs, whole.eigenvectors[:, :6], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(kernel_pca(gram, y, modes=40).eigenvalues, whole.eigenvalues)


def test_modes_out_of_range_is_one_clear_error():
    with pytest.raises(ValueError, match=r"modes must be in \[1, p = 3\], got 4"):
        kernel_pca(torch.eye(3), modes=4)
