"""One Adam builder for every loop (capcore.optim.adam, issue #38): each kernel gives bitwise the
parameters of the direct torch construction it replaced, and no module builds an Adam of its own."""
import re
from pathlib import Path

import pytest
import torch

from capcore.optim import adam

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("capcore", "capdata", "embedder", "joint", "feature_extract", "captioners", "rl", "eval", "capaware",
            "scripts", "studies")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def trained(make_optimizer, device: str, steps: int = 5) -> tuple[dict, dict]:
    """A small seeded model after ``steps`` Adam steps on seeded data: (parameters, optimizer state)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(device)
    opt = make_optimizer(model.parameters())
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=data).to(device), torch.randn(8, 3, generator=data).to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, opt.state_dict()


# (builder call, the construction it replaced): stage one and pretraining (fused), the captioner trainer
# (default kernel with betas and eps), the head warm-up (default kernel, lr alone)
CASES = {
    "fused (stage one, pretraining)": (
        lambda p: adam(p, lr=1e-2, weight_decay=1e-4),
        lambda p: torch.optim.Adam(p, fused=True, lr=1e-2, weight_decay=1e-4)),
    "default kernel (captioner trainer)": (
        lambda p: adam(p, fused=False, lr=5e-3, betas=(0.8, 0.98), eps=1e-8, weight_decay=1e-3),
        lambda p: torch.optim.Adam(p, lr=5e-3, betas=(0.8, 0.98), eps=1e-8, weight_decay=1e-3)),
    "default kernel (head warm-up)": (
        lambda p: adam(p, fused=False, lr=1e-2),
        lambda p: torch.optim.Adam(p, lr=1e-2)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_the_builder_gives_bitwise_the_parameters_of_the_construction_it_replaced(case, device):
    built, direct = CASES[case]
    (ours, our_state), (theirs, their_state) = trained(built, device), trained(direct, device)
    for key in theirs:
        assert torch.equal(ours[key], theirs[key]), key
    assert our_state["param_groups"] == their_state["param_groups"]  # kernel fields too: the same checkpoints


def test_the_two_kernels_are_different_updates_so_the_choice_matters():
    """Guards the test above: were both settings one kernel, it could not tell a caller's kernel changed."""
    fused, plain = (trained(lambda p: adam(p, lr=1e-2), "cpu", 20)[0],
                    trained(lambda p: adam(p, fused=False, lr=1e-2), "cpu", 20)[0])
    assert torch.optim.Adam in type(adam([torch.zeros(1, requires_grad=True)])).__mro__
    assert adam([torch.zeros(1, requires_grad=True)], fused=False).defaults["fused"] is None  # torch's own choice
    assert any(not torch.equal(fused[k], plain[k]) for k in fused)


def test_the_kernel_is_chosen_by_fused_alone():
    with pytest.raises(TypeError, match="fused"):
        adam([torch.zeros(1, requires_grad=True)], foreach=True)


DIRECT_ADAM = re.compile(r"\boptim\.Adam\s*\(|from\s+torch\.optim\s+import\s+[^\n]*\bAdam\b")


def test_no_module_builds_an_adam_outside_capcore_optim():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "capcore" / "optim.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if DIRECT_ADAM.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "build Adam with capcore.optim.adam:\n" + "\n".join(offenders)
