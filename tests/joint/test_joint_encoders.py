"""The joint space's encoders (issue #66): the caption's state is taken at its true length, the image side pools
the grid, both give unit vectors; and the whole space learns (a few Adam steps lower VSE++)."""
import pytest
import torch
import torch.nn.functional as F

from joint.image_encoder import ImageEncoder
from joint.losses.vse import VSEPlusPlus
from joint.model import JointSpace
from joint.text_encoder import TextEncoder, caption_lengths


def encoder(seed=0):
    torch.manual_seed(seed)
    return TextEncoder(vocab_size=12, word_dim=6, embed_dim=5).eval()


def test_lengths_end_at_the_first_zero():
    ids = torch.tensor([[5, 3, 0, 4], [1, 2, 3, 4], [0, 0, 0, 0], [7, 0, 0, 0]])
    assert caption_lengths(ids).tolist() == [2, 4, 0, 1]


def test_padding_does_not_change_a_caption():
    enc = encoder()
    short = enc(torch.tensor([[5, 3, 7, 0, 0], [2, 0, 0, 0, 0]]))
    long = enc(torch.tensor([[5, 3, 7, 0, 0, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0, 0, 0, 0]]))
    assert torch.allclose(short, long, atol=1e-6)
    unpadded = enc(torch.tensor([[5, 3, 7]]))  # no end token at all: the whole row is the caption
    assert torch.allclose(short[0], unpadded[0], atol=1e-6)


def test_tokens_after_the_end_are_never_read():
    enc = encoder()
    clean = enc(torch.tensor([[5, 3, 7, 0, 0, 0]]))
    noisy = enc(torch.tensor([[5, 3, 7, 0, 9, 2]]))  # a sampler's leftovers after the end token
    assert torch.allclose(clean, noisy, atol=1e-6)
    assert not torch.allclose(clean, enc(torch.tensor([[5, 3, 7, 9, 2, 0]])), atol=1e-3)  # before the end they count


def test_the_state_is_the_grus_at_the_true_length():
    """Against an independent computation: the GRU run on the caption's words alone, its last output."""
    enc = encoder()
    ids = torch.tensor([[4, 8, 1, 0, 0], [6, 2, 9, 11, 3]])
    got = enc(ids)
    for row, length in zip(range(2), (3, 5)):
        out, _ = enc.rnn(enc.embed(ids[row:row + 1, :length]))
        assert torch.allclose(got[row], F.normalize(out[0, -1], dim=0), atol=1e-6)
    assert torch.allclose(got.norm(dim=1), torch.ones(2), atol=1e-6)


def test_an_empty_caption_is_one_vector():
    enc = encoder()
    empty = enc(torch.tensor([[0, 0, 0], [0, 5, 6]]))
    assert torch.allclose(empty[0], empty[1], atol=1e-6) and torch.isfinite(empty).all()


def test_the_image_side_projects_fc_or_the_pooled_grid():
    torch.manual_seed(0)
    fc_enc, att_enc = ImageEncoder(8, 4, "fc"), ImageEncoder(8, 4, "att")
    att_enc.load_state_dict(fc_enc.state_dict())
    grid = torch.randn(3, 49, 8)
    pooled = att_enc(grid)
    assert torch.allclose(pooled, fc_enc(grid.mean(1)), atol=1e-6)
    assert torch.allclose(pooled.norm(dim=1), torch.ones(3), atol=1e-6)
    assert fc_enc(grid.mean(1).to(torch.bfloat16)).dtype == torch.float32  # a bfloat16 features file
    with pytest.raises(ValueError, match="att features must have 3"):
        att_enc(grid.mean(1))
    with pytest.raises(ValueError, match="use one of fc, att"):
        ImageEncoder(8, 4, "grid")


def test_the_similarity_is_the_cosine_of_both_sides():
    torch.manual_seed(0)
    space = JointSpace(vocab_size=12, feat_dim=8, embed_dim=6, word_dim=5).eval()
    feats, ids = torch.randn(3, 8), torch.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    with torch.no_grad():
        sim = space.similarity(feats, ids)
        assert torch.allclose(sim, space.embed_images(feats) @ space.embed_captions(ids).t())
    assert sim.shape == (3, 3) and float(sim.abs().max()) <= 1 + 1e-6
    assert JointSpace(**space.args).args == space.args


def test_a_few_adam_steps_lower_vse_pp():
    torch.manual_seed(0)
    space = JointSpace(vocab_size=20, feat_dim=16, embed_dim=8, word_dim=8)
    feats = torch.randn(6, 16)
    ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9], [10, 0, 0, 0], [11, 12, 13, 0], [14, 15, 0, 0]])
    loss_fn, opt = VSEPlusPlus(0.2), torch.optim.Adam(space.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = loss_fn(*space(feats, ids))
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        if len(losses) == 1:
            assert space.image.proj.weight.grad.abs().sum() > 0 and space.text.rnn.weight_ih_l0.grad.abs().sum() > 0
            assert float(space.text.embed.weight.grad[0].abs().sum()) == 0.0  # the pad row learns nothing
        opt.step()
    assert losses[-1] < 0.5 * losses[0], losses
