import pytest
import torch

from repdyn.nn.optim import StackedOptimizer

REFERENCES = {
    "gd": lambda p, lr, wd: torch.optim.SGD(p, lr=lr, weight_decay=wd),
    "momentum": lambda p, lr, wd: torch.optim.SGD(p, lr=lr, momentum=0.9, weight_decay=wd),
    "adam": lambda p, lr, wd: torch.optim.Adam(p, lr=lr, weight_decay=wd),
}
CASES = [(kind, wd, False) for kind in REFERENCES for wd in (0.0, 0.1)] + [("gd", 0.0, True), ("momentum", 0.0, True)]


@pytest.mark.parametrize("kind, weight_decay, prescaled", CASES)
def test_stacked_updates_equal_torch_optim_member_by_member(kind, weight_decay, prescaled):
    """step(grads), and step_prescaled(lr·grads) where it applies, equal torch.optim on each member."""
    reference = REFERENCES[kind]
    g = torch.Generator().manual_seed(0)
    lrs = torch.tensor([0.1, 0.03], dtype=torch.float64)
    stacked = [torch.randn(2, 3, 4, generator=g, dtype=torch.float64), torch.randn(2, 5, generator=g,
                                                                                  dtype=torch.float64)]
    grads = [[torch.randn(s.shape, generator=g, dtype=torch.float64) for s in stacked] for _ in range(4)]
    refs = [[s[k].clone().requires_grad_() for s in stacked] for k in range(2)]
    opts = [reference(refs[k], float(lrs[k]), weight_decay) for k in range(2)]
    opt = StackedOptimizer(stacked, lrs, kind, weight_decay=weight_decay)
    assert (opt.loss_scale is not None) == (kind != "adam" and not weight_decay)
    if opt.loss_scale is None:
        with pytest.raises(ValueError, match="prescaled"):
            opt.step_prescaled(grads[0])
    for step_grads in grads:
        if prescaled:
            opt.step_prescaled([gr * lrs.view(-1, *([1] * (gr.dim() - 1))) for gr in step_grads])
        else:
            opt.step(step_grads)
        for k in range(2):
            for p, gr in zip(refs[k], step_grads, strict=True):
                p.grad = gr[k].clone()
            opts[k].step()
    for k in range(2):
        for s, p in zip(stacked, refs[k], strict=True):
            torch.testing.assert_close(s[k], p.detach(), rtol=1e-12, atol=1e-14)
