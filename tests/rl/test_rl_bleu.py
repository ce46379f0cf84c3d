"""The BLEU-4 term of the SCST reward (rl/bleu.py, rl.reward.bleu4_weight) against pycocoevalcap's own
BleuScorer: its per-image BLEU-4 with option "closest" (what self-critical.pytorch adds to CIDEr-D with
``bleu_reward_weight``), to 1e-9, on random rows and on near-copies of references, with and without the
end token; and the reward with a BLEU-4 weight equals CIDEr-D plus that weight times pycocoevalcap's
BLEU-4."""
import numpy as np
import pytest
from pycocoevalcap.bleu.bleu_scorer import BleuScorer

from benchmarks.cider_reference import ids_to_string
from rl.bleu import sentence_bleu
from rl.cider import CiderReward, load_or_build_doc_freq, with_end_token
from test_rl_cider import synth  # noqa: F401  (the module's labels.h5 fixture)


def pycoco_bleu4(cands: list[str], refs: list[list[str]]) -> np.ndarray:
    scorer = BleuScorer(n=4)
    for c, r in zip(cands, refs):
        scorer += (c, r)
    _, per_image = scorer.compute_score(option="closest")
    return np.array(per_image[3])


def random_rows(rng, k: int, width: int, vocab: int) -> np.ndarray:
    rows = rng.integers(1, vocab + 1, (k, width))
    ends = rng.integers(0, width + 1, k)  # 0 words up to a full row with no EOS
    rows[np.arange(width)[None, :] >= ends[:, None]] = 0
    return rows


def test_sentence_bleu_equals_pycocoevalcap_on_random_groups():
    rng = np.random.default_rng(0)
    for _ in range(40):
        groups = int(rng.integers(1, 4))
        cand_group = rng.integers(0, groups, int(rng.integers(1, 10)))
        ref_group = np.concatenate([np.arange(groups), rng.integers(0, groups, int(rng.integers(0, 9)))])
        vocab = int(rng.integers(3, 15))  # small vocabularies: many matches, repeated n-grams to clip
        cands, refs = random_rows(rng, len(cand_group), 10, vocab), random_rows(rng, len(ref_group), 12, vocab)
        ours = sentence_bleu(cands, cand_group, refs, ref_group, vocab + 1)
        theirs = pycoco_bleu4([ids_to_string(c) for c in cands],
                              [[ids_to_string(r) for r, g in zip(refs, ref_group) if g == cg] for cg in cand_group])
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("eos", [False, True], ids=["no-eos", "eos"])
def test_reward_with_bleu4_weight_is_cider_plus_weighted_pycocoevalcap_bleu4(synth, eos):  # noqa: F811
    labels_path, labels, base = synth
    df = load_or_build_doc_freq(labels_path, eos=eos)
    rng = np.random.default_rng(1)
    train = np.flatnonzero(labels.splits == "train")
    label_ix = np.repeat(rng.choice(train, 12, replace=False), 4)
    cands = random_rows(rng, len(label_ix), 16, base - 1)
    for k in range(0, len(cands), 2):  # near-copies of a reference: BLEU-4 well above 0
        cands[k] = labels.captions_of(label_ix[k])[k % 3]
        cands[k, rng.integers(0, 16)] = rng.integers(1, base)
    theirs = pycoco_bleu4([ids_to_string(c, eos) for c in cands],
                          [[ids_to_string(s, eos) for s in labels.captions_of(i)] for i in label_ix])
    assert (theirs > 0.3).sum() >= 6 and (theirs < 1e-3).sum() >= 6  # both regimes were exercised
    cider = CiderReward(labels, df)(cands, label_ix)
    mixed = CiderReward(labels, df, bleu4_weight=0.5)(cands, label_ix)
    np.testing.assert_allclose(mixed - cider, 0.5 * theirs, rtol=0, atol=1e-9)


def test_end_token_is_a_word_of_the_bleu_term():
    """A caption cut one word early keeps BLEU-4 near 1 without the end token, not with it."""
    ref = np.array([[3, 4, 5, 6, 7, 8, 0]])
    cut = np.array([[3, 4, 5, 6, 7, 0, 0]])
    plain = sentence_bleu(cut, [0], ref, [0], 10)
    ended = sentence_bleu(with_end_token(cut, 10), [0], with_end_token(ref, 10), [0], 11)
    whole = sentence_bleu(with_end_token(ref, 10), [0], with_end_token(ref, 10), [0], 11)
    assert whole[0] == pytest.approx(1.0) and ended[0] < plain[0]


def test_a_vocabulary_too_large_for_int64_keys_is_one_line_error():
    from capcore.errors import CapawareError
    from rl.ngrams import _check_base

    _check_base(10_000, 4)  # COCO-sized: fits
    with pytest.raises(CapawareError, match="cannot pack 4-grams"):
        _check_base(2 ** 16, 4)
