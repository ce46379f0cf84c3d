"""Captioner files written before a weight moved still load (issue #48: the LSTM cores own their ``ctx2att``, which
the captioner held before): the old names are remapped on load, to the same memory and the same captions."""
import pytest
import torch

from captioners import decoding
from captioners.model import Captioner

ARGS = dict(vocab_size=9, fc_feat_size=6, att_feat_size=6, input_encoding_size=8, rnn_size=8, att_hid_size=5,
            drop_prob_lm=0.0)


@pytest.mark.parametrize("core", ["att2all2", "topdown"])
def test_weights_saved_with_the_captioners_ctx2att_load_into_the_core_and_decode_alike(core):
    torch.manual_seed(0)
    model = Captioner(core, **ARGS).eval()
    old = {k.replace("core.ctx2att.", "ctx2att."): v for k, v in model.state_dict().items()}  # the layout before
    assert "ctx2att.weight" in old and not any(k.startswith("core.ctx2att.") for k in old)
    torch.manual_seed(1)
    loaded = Captioner(core, **ARGS).eval()
    loaded.load_state_dict(old)  # strict: every old key found its place
    fc, att = torch.randn(3, 6), torch.randn(3, 4, 6)
    assert torch.equal(loaded.encode(fc, att).memory, model.encode(fc, att).memory)
    with torch.no_grad():
        assert torch.equal(decoding.greedy(loaded, fc, att, 6).seq, decoding.greedy(model, fc, att, 6).seq)
    with pytest.raises(RuntimeError, match="ctx2att.stray"):  # a real mismatch is still refused
        loaded.load_state_dict({**old, "ctx2att.stray": torch.zeros(1)})


def old_order(model: Captioner) -> list[str]:
    """The parameter names in the order the captioner registered them before the move: ctx2att just before logit."""
    names = [n for n, _ in model.named_parameters() if not n.startswith("core.ctx2att.")]
    at = names.index("logit.weight")
    return names[:at] + ["core.ctx2att.weight", "core.ctx2att.bias"] + names[at:]


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_adam_counts_the_parameters_in_the_order_of_files_written_before(core):
    model = Captioner(core, **ARGS)
    by_id = {id(p): n for n, p in model.named_parameters()}
    order = [by_id[id(p)] for p in model.parameters_in_file_order()]
    assert sorted(order) == sorted(by_id.values())  # every parameter once
    assert order == (old_order(model) if core != "transformer" else [n for n, _ in model.named_parameters()])
