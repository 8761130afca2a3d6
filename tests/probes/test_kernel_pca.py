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
