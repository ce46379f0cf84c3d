"""embedder.trunk_cache: a study's rows reuse what a frozen trunk computed, only for the same weights and bank."""
import torch

from embedder import trunk_cache


class Bank(list):
    pass


def test_same_weights_and_bank_reuse_the_result_other_weights_recompute():
    trunk_cache.forget()
    torch.manual_seed(0)
    net, bank, calls = torch.nn.Linear(3, 2), Bank(range(5)), []

    def compute():
        calls.append(1)
        return net.weight.detach().clone()

    first = trunk_cache.computed_once("maps", net, bank, ("cpu",), compute)
    again = trunk_cache.computed_once("maps", net, bank, ("cpu",), compute)
    assert again is first and len(calls) == 1
    trunk_cache.computed_once("maps", net, Bank(range(5)), ("cpu",), compute)  # another bank
    assert len(calls) == 2
    with torch.no_grad():
        net.weight[0, 0] += 1e-3  # a row that trained these weights: never the stale result
    changed = trunk_cache.computed_once("maps", net, bank, ("cpu",), compute)
    assert len(calls) == 3 and not torch.equal(changed, first)
    trunk_cache.computed_once("maps", net, bank, ("cpu", torch.bfloat16), compute)  # another precision
    assert len(calls) == 4
    trunk_cache.forget()


def test_digest_sees_buffers_too():
    bn = torch.nn.BatchNorm2d(4)
    before = trunk_cache.weights_digest(bn)
    bn.running_mean += 1
    assert trunk_cache.weights_digest(bn) != before

