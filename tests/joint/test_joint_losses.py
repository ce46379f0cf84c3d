"""VSE0, VSE++, the warm-up between them and the per-caption text -> image hinge (issue #66), against a batch
worked by hand."""
import math

import pytest
import torch

from capcore.errors import CapawareError
from joint.losses import hinges
from joint.losses.registry import build_loss, loss_entry
from joint.losses.vse import VSE0, VSEPlusPlus
from joint.losses.warmup import WarmupVSE

MARGIN = 0.2
# Image i (row) against caption j (column); the diagonal holds the positive pairs.
S = [[0.90, 0.55, 0.45],
     [0.30, 0.70, 0.60],
     [0.20, 0.35, 0.50]]


def embeddings_with_scores(scores):
    """Unit image rows e_i and unit caption rows whose cosine with e_i is scores[i][j] (a 4th coordinate makes up the
    norm), so img @ txt.T is exactly ``scores``."""
    n = len(scores)
    img = torch.eye(n, n + 1, dtype=torch.float64)
    cols = [[scores[i][j] for i in range(n)] for j in range(n)]
    txt = torch.tensor([col + [math.sqrt(1 - sum(v * v for v in col))] for col in cols], dtype=torch.float64)
    return img, txt


# By hand, hinge [m + s(i, j) - s(positive)]_+ with m = 0.2:
# image -> text, image i against the other captions j (its row):
#   image 0: j1 .2+.55-.9 = -.15 -> 0, j2 .2+.45-.9 = -.25 -> 0    sum 0    max 0
#   image 1: j0 .2+.30-.7 = -.20 -> 0, j2 .2+.60-.7 =  .10         sum .10  max .10
#   image 2: j0 .2+.20-.5 = -.10 -> 0, j1 .2+.35-.5 =  .05         sum .05  max .05
# text -> image, caption j against the other images i (its column):
#   caption 0: i1 .2+.30-.9 = -.40 -> 0, i2 .2+.20-.9 = -.50 -> 0  sum 0    max 0
#   caption 1: i0 .2+.55-.7 =  .05,      i2 .2+.35-.7 = -.15 -> 0  sum .05  max .05
#   caption 2: i0 .2+.45-.5 =  .15,      i1 .2+.60-.5 =  .30       sum .45  max .30
I2T_SUM, I2T_MAX = [0.0, 0.10, 0.05], [0.0, 0.10, 0.05]
T2I_SUM, T2I_MAX = [0.0, 0.05, 0.45], [0.0, 0.05, 0.30]
VSE0_TOTAL = 0.10 + 0.05 + 0.05 + 0.45  # 0.65
VSEPP_TOTAL = 0.10 + 0.05 + 0.05 + 0.30  # 0.50


def test_the_hand_worked_batch_has_the_planned_scores():
    img, txt = embeddings_with_scores(S)
    assert torch.allclose(txt.norm(dim=1), torch.ones(3, dtype=torch.float64))
    assert torch.allclose(hinges.similarities(img, txt), torch.tensor(S, dtype=torch.float64))


def test_vse0_sums_every_hinge_both_ways():
    img, txt = embeddings_with_scores(S)
    i2t, t2i = hinges.per_item(img, txt, MARGIN, hardest=False)
    assert i2t.tolist() == pytest.approx(I2T_SUM) and t2i.tolist() == pytest.approx(T2I_SUM)
    assert float(VSE0(MARGIN)(img, txt)) == pytest.approx(VSE0_TOTAL)
    assert VSE0(MARGIN).per_item(img, txt).tolist() == pytest.approx([a + b for a, b in zip(I2T_SUM, T2I_SUM)])


def test_vse_pp_keeps_the_hardest_negative_both_ways():
    img, txt = embeddings_with_scores(S)
    i2t, t2i = hinges.per_item(img, txt, MARGIN, hardest=True)
    assert i2t.tolist() == pytest.approx(I2T_MAX) and t2i.tolist() == pytest.approx(T2I_MAX)
    assert float(VSEPlusPlus(MARGIN)(img, txt)) == pytest.approx(VSEPP_TOTAL)
    assert hinges.text_to_image_hinge(img, txt, MARGIN).tolist() == pytest.approx(T2I_MAX)


def test_the_margin_moves_every_active_hinge():
    img, txt = embeddings_with_scores(S)
    # margin .25: each hinge above moves by .05; image 2's j0 (-.05) and caption 1's i2 (-.10) stay at 0:
    # image -> text .15 + .10, text -> image .10 + (.20 + .35): VSE0 = .90, VSE++ = .15 + .10 + .10 + .35 = .70
    assert float(VSE0(0.25)(img, txt)) == pytest.approx(0.90)
    assert float(VSEPlusPlus(0.25)(img, txt)) == pytest.approx(0.70)


def test_the_text_to_image_hinge_rewards_the_caption_that_names_its_image():
    e = torch.eye(2)
    img = e.clone()  # image 0 = e0, image 1 = e1
    txt = torch.stack([e[0], e[0]])  # caption 0 names image 0; caption 1 names image 0 too, not its own
    hinge = hinges.text_to_image_hinge(img, txt, MARGIN)
    # caption 0: [.2 + s(c0, v1) - s(c0, v0)]_+ = [.2 + 0 - 1]_+ = 0; caption 1: [.2 + s(c1, v0) - s(c1, v1)] = 1.2
    assert hinge.tolist() == pytest.approx([0.0, 1.2])
    reward = -hinge
    assert reward[0] > reward[1]
    worst = hinges.text_to_image_hinge(torch.stack([e[0], -e[0]]), txt, MARGIN)  # caption 1 opposite its image
    assert float(worst[1]) == pytest.approx(2 + MARGIN)  # the largest a hinge of cosines can be


def test_caption_hinges_take_several_captions_per_image_and_images_without_captions():
    img, txt = embeddings_with_scores(S)
    # the square case is the text -> image column of the hand-worked batch, both reductions
    for hardest, want in ((True, T2I_MAX), (False, T2I_SUM)):
        got = hinges.caption_hinges(img, txt, torch.arange(3), MARGIN, hardest)
        assert got.tolist() == pytest.approx(want)
    # captions 1 and 2 both claim image 2 now, and image 0 owns none (an unlabeled image, only a negative):
    # caption 1 against image 2 (s .35): i0 .2+.55-.35 = .40, i1 .2+.70-.35 = .55 -> max .55, sum .95
    # caption 2 against image 2 (s .50): i0 .2+.45-.50 = .15, i1 .2+.60-.50 = .30 -> max .30, sum .45
    owner = torch.tensor([2, 2])
    assert hinges.caption_hinges(img, txt[1:], owner, MARGIN).tolist() == pytest.approx([0.55, 0.30])
    assert hinges.caption_hinges(img, txt[1:], owner, MARGIN, hardest=False).tolist() == pytest.approx([0.95, 0.45])
    with pytest.raises(ValueError, match="one width"):
        hinges.caption_hinges(img, txt[:, :3], owner, MARGIN)


def test_a_batch_of_one_has_no_negative():
    v = torch.nn.functional.normalize(torch.randn(1, 4), dim=1)
    assert float(VSEPlusPlus()(v, v)) == 0.0 and float(VSE0()(v, v)) == 0.0


def test_the_warmup_is_vse0_then_vse_pp_and_resumes_at_the_same_step():
    img, txt = embeddings_with_scores(S)
    loss = WarmupVSE(MARGIN, warmup_steps=2)
    loss.eval()
    assert float(loss(img, txt)) == pytest.approx(VSE0_TOTAL) and int(loss.steps) == 0  # eval does not count
    loss.train()
    seen = [float(loss(img, txt)) for _ in range(3)]
    assert seen == pytest.approx([VSE0_TOTAL, VSE0_TOTAL, VSEPP_TOTAL])
    resumed = WarmupVSE(MARGIN, warmup_steps=2)
    resumed.load_state_dict(loss.state_dict())
    assert resumed.uses_hardest() and float(resumed(img, txt)) == pytest.approx(VSEPP_TOTAL)


def test_the_registry_builds_each_loss_with_its_settings():
    assert type(build_loss("vse0")) is VSE0 and type(build_loss("vse_pp")) is VSEPlusPlus
    warm = build_loss("warmup", {"warmup_steps": 5, "margin": 0.1})
    assert isinstance(warm, WarmupVSE) and (warm.warmup_steps, warm.margin) == (5, 0.1)
    assert loss_entry("vse_pp").args["margin"] == MARGIN
    with pytest.raises(ValueError, match="warmup_steps"):
        build_loss("vse0", {"warmup_steps": 3})
    with pytest.raises(CapawareError, match="vse_pp"):
        build_loss("triplet")
