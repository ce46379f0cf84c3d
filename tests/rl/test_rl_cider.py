"""The SCST reward (rl/cider.py) against pycocoevalcap's own CiderScorer: the same document frequencies
(counted by pycocoevalcap itself on the training references) must give the same CIDEr-D, 1e-6, on
random and on hand-made captions, in both EOS variants (without the end token: pycocoevalcap on the
caption strings; with it: on the strings self-critical.pytorch's array_to_str writes, "12 7 0", and
document frequencies counted by pycocoevalcap on references written the same way); everything after the
first EOS is ignored; the cache is keyed to the labels file and to the variant."""
from collections import defaultdict

import h5py
import numpy as np
import pytest

from benchmarks.cider_reference import doc_freq_as_ngrams, ids_to_string, reference_cider_d
from captioners.prepro import Labels, prepro, read_labels
from rl.ngrams import decode_key
from rl.cider import (
    CiderReward,
    DocFreq,
    build_doc_freq,
    with_end_token,
    cider_d,
    load_or_build_doc_freq,
    ngram_table,
)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Shapes-captions (60 images) -> labels.h5 with a small vocabulary and 16-word captions."""
    from capdata.synthetic import generate_captions

    root = tmp_path_factory.mktemp("rlcider")
    json_path = generate_captions(root / "data", n_train=40, n_test=10, seed=3, size=32)
    prepro(json_path, root / "prep", threshold=1, max_length=16)
    labels_path = root / "prep" / "labels.h5"
    with h5py.File(labels_path) as f:
        base = int(f.attrs["vocab_size"]) + 1
    return labels_path, read_labels(labels_path), base


EOS = pytest.mark.parametrize("eos", [False, True], ids=["no-eos", "eos"])


def pycoco_doc_freq(labels: Labels, split: str = "train", eos: bool = False):
    """pycocoevalcap's own document frequencies of the split's references, and the number of images."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    scorer = CiderScorer(n=4, sigma=6.0)
    images = np.flatnonzero(labels.splits == split)
    for i in images:
        scorer += (None, [ids_to_string(s, eos) for s in labels.captions_of(i)])
    scorer.compute_doc_freq()
    return dict(scorer.document_frequency), len(images)


def check_against_pycoco(labels, df, cands, label_ix, pycoco_df, n_docs):
    ours = CiderReward(labels, df)(cands, label_ix)
    theirs = reference_cider_d([ids_to_string(c, df.eos) for c in cands],
                               [[ids_to_string(s, df.eos) for s in labels.captions_of(i)] for i in label_ix],
                               pycoco_df, n_docs)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    return ours


def test_end_token_is_written_where_the_caption_ends():
    seqs = np.array([[3, 1, 0, 2], [2, 2, 2, 2], [0, 5, 5, 5]])
    np.testing.assert_array_equal(with_end_token(seqs, 9), [[3, 1, 9, 0, 0], [2, 2, 2, 2, 0], [9, 0, 0, 0, 0]])
    assert ids_to_string(seqs[0], eos=True) == "3 1 0" and ids_to_string(seqs[0]) == "3 1"
    assert ids_to_string(seqs[1], eos=True) == "2 2 2 2"  # filled every slot: no end token (array_to_str)


def test_ngram_keys_round_trip_and_counts():
    seqs = np.array([[3, 1, 3, 1, 0, 2], [2, 2, 2, 0, 0, 0]])
    tab = ngram_table(seqs, base=4)
    got = {}
    for row, d, c in zip(tab.row, tab.dense, tab.count):
        got[(int(row), decode_key(tab.keys[d], 4))] = int(c)
    expect = {(0, (3,)): 2, (0, (1,)): 2, (0, (3, 1)): 2, (0, (1, 3)): 1, (0, (3, 1, 3)): 1, (0, (1, 3, 1)): 1,
              (0, (3, 1, 3, 1)): 1, (1, (2,)): 3, (1, (2, 2)): 2, (1, (2, 2, 2)): 1}
    assert got == expect  # the 2 after the EOS of row 0 is not a word
    assert tab.lengths.tolist() == [4, 3]
    assert [tab.order[tab.keys == k][0] for k in tab.keys] == [len(decode_key(k, 4)) - 1 for k in tab.keys]


@EOS
def test_doc_freq_equals_pycocoevalcaps_count(synth, eos):
    _, labels, base = synth
    df = build_doc_freq(labels, base, "train", eos=eos)
    theirs, n_docs = pycoco_doc_freq(labels, eos=eos)
    assert (("0",) in theirs) == eos
    assert doc_freq_as_ngrams(df) == theirs
    assert df.n_docs == n_docs == int((labels.splits == "train").sum())


@EOS
def test_reward_equals_pycocoevalcap_on_random_captions(synth, eos):
    labels_path, labels, base = synth
    df = load_or_build_doc_freq(labels_path, eos=eos)
    pycoco_df, n_docs = pycoco_doc_freq(labels, eos=eos)
    rng = np.random.default_rng(0)
    train = np.flatnonzero(labels.splits == "train")
    label_ix = np.repeat(rng.choice(train, 32, replace=False), 5)  # 32 images x 5 samples
    cands = rng.integers(1, base, (len(label_ix), 16))
    cands[np.arange(len(cands)), rng.integers(0, 17, len(cands)).clip(max=15)] = 0  # EOS anywhere, or none
    for k in range(0, len(cands), 2):  # half of them near-copies of a reference: real n-gram overlap
        ref = labels.captions_of(label_ix[k])[k % 3]
        cands[k] = ref
        cands[k, rng.integers(0, 16, 2)] = rng.integers(1, base, 2)
    ours = check_against_pycoco(labels, df, cands, label_ix, pycoco_df, n_docs)
    assert (ours > 0.5).sum() > 20 and (ours == 0).sum() > 5  # both regimes were exercised


@EOS
def test_reward_equals_pycocoevalcap_on_hand_made_captions(synth, eos):
    labels_path, labels, base = synth
    df = load_or_build_doc_freq(labels_path, eos=eos)
    pycoco_df, n_docs = pycoco_doc_freq(labels, eos=eos)
    image = int(np.flatnonzero(labels.splits == "train")[0])
    ref = labels.captions_of(image)[0]
    n = int((ref > 0).sum())
    word = int(ref[0])
    unseen = base - 1  # UNK: in no training caption of this set (threshold 1 keeps every word)
    rows = [
        ref,  # a reference itself
        np.r_[ref[:n // 2], np.zeros(16 - n // 2, int)],  # its first half (length penalty)
        np.r_[[word] * 16],  # one word 16 times, no EOS (clipping, cut at max length)
        np.r_[[word], np.zeros(15, int)],  # one word (zero bigrams: pycocoevalcap's length 0)
        np.zeros(16, int),  # the empty caption
        np.r_[[unseen] * 3, np.zeros(13, int)],  # words of no reference (df 0 -> idf log N)
        labels.captions_of(image + 1)[0],  # another image's caption
        np.r_[ref[:n][::-1], np.zeros(16 - n, int)],  # the right words in reverse order
    ]
    ours = check_against_pycoco(labels, df, np.stack(rows), np.full(len(rows), image), pycoco_df, n_docs)
    assert ours[0] > ours[1] > 0 and ours[0] > ours[7] and ours[4] == 0 and ours[5] == 0


@EOS
def test_tokens_after_eos_do_not_change_the_reward(synth, eos):
    labels_path, labels, base = synth
    reward = CiderReward(labels, load_or_build_doc_freq(labels_path, eos=eos))
    rng = np.random.default_rng(1)
    train = np.flatnonzero(labels.splits == "train")[:8]
    clean = np.stack([np.r_[labels.captions_of(i)[1][:6], np.zeros(10, int)] for i in train])
    dirty = clean.copy()
    dirty[:, 7:] = rng.integers(1, base, (len(train), 9))  # garbage after the EOS at position 6
    np.testing.assert_array_equal(reward(clean, train), reward(dirty, train))
    np.testing.assert_array_equal(reward(clean, train), reward(clean[:, :7], train))  # padding width is irrelevant
    eos_first = dirty.copy()
    eos_first[:, 0] = 0
    assert (reward(eos_first, train) == 0).all()


@EOS
def test_reward_does_not_depend_on_the_rest_of_the_batch(synth, eos):
    labels_path, labels, _ = synth
    reward = CiderReward(labels, load_or_build_doc_freq(labels_path, eos=eos))
    train = np.flatnonzero(labels.splits == "train")
    cands = np.stack([labels.captions_of(i)[2] for i in train[:10]])
    alone = np.array([reward(cands[k:k + 1], train[k:k + 1])[0] for k in range(10)])
    np.testing.assert_allclose(reward(cands, train[:10]), alone, rtol=0, atol=1e-12)
    shuffled = np.random.default_rng(0).permutation(10)
    np.testing.assert_allclose(reward(cands[shuffled], train[:10][shuffled]), alone[shuffled], rtol=0, atol=1e-12)


def test_pure_function_matches_on_groups_with_unequal_reference_counts():
    """Images with 1, 3 and 2 references, given out of order; corpus of 3 documents."""
    refs = np.array([[1, 2, 3, 0], [4, 5, 0, 0], [1, 2, 0, 0], [2, 3, 4, 5], [1, 1, 2, 0], [5, 0, 0, 0]])
    ref_group = np.array([1, 2, 1, 0, 1, 2])
    cands = np.array([[1, 2, 3, 4], [4, 5, 5, 0], [1, 2, 0, 0], [3, 0, 0, 0]])
    cand_group = np.array([1, 2, 0, 1])
    labels = Labels(labels=refs[np.argsort(ref_group, kind="stable")], lengths=None,
                    start_ix=np.array([0, 1, 4]), end_ix=np.array([1, 4, 6]), image_ids=np.arange(3),
                    splits=np.array(["train"] * 3), max_length=4, path="mem")
    df = build_doc_freq(labels, base=6)
    ours = cider_d(cands, cand_group, refs, ref_group, df)
    by_group = defaultdict(list)
    for s, g in zip(refs, ref_group):
        by_group[int(g)].append(ids_to_string(s))
    theirs = reference_cider_d([ids_to_string(c) for c in cands], [by_group[int(g)] for g in cand_group],
                               doc_freq_as_ngrams(df), 3)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    assert (ours > 0).all()


def test_doc_freq_cache_is_tied_to_the_labels_file(synth, tmp_path, monkeypatch):
    import shutil

    from rl import cider

    labels_path, _, _ = synth
    labels_copy = tmp_path / "labels.h5"
    shutil.copy(labels_path, labels_copy)
    df = load_or_build_doc_freq(labels_copy)
    cache = tmp_path / "cider_df_train.h5"
    with h5py.File(cache) as f:
        assert f.attrs["split"] == "train" and f.attrs["n_docs"] == df.n_docs and len(f.attrs["labels_sha256"]) == 64

    calls = []
    real = cider.build_doc_freq
    monkeypatch.setattr(cider, "build_doc_freq", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = load_or_build_doc_freq(labels_copy)
    assert not calls and isinstance(again, DocFreq) and np.array_equal(again.keys, df.keys)
    with h5py.File(labels_copy, "a") as f:  # the labels change (e.g. prepro rerun): the cache is stale
        f.attrs["note"] = "changed"
    load_or_build_doc_freq(labels_copy)
    assert calls == [1]
    load_or_build_doc_freq(labels_copy, split="val")  # another split: its own file
    assert calls == [1, 1] and (tmp_path / "cider_df_val.h5").is_file()


def test_end_token_pays_only_captions_that_end_where_references_end(synth):
    """A reference cut before its last word scores its n-grams either way; with the end token it also
    misses every "... <eos>" n-gram, so cutting costs more than without it (SacreEOS's point)."""
    labels_path, labels, _ = synth
    train = np.flatnonzero(labels.splits == "train")[:10]
    full = np.stack([labels.captions_of(i)[0] for i in train])
    cut = full.copy()
    cut[np.arange(len(cut)), (full > 0).sum(1) - 1] = 0  # drop the last word
    loss = {}
    for eos in (False, True):
        reward = CiderReward(labels, load_or_build_doc_freq(labels_path, eos=eos))
        loss[eos] = reward(full, train) - reward(cut, train)
    assert (loss[True] > 0).all() and loss[True].mean() > loss[False].mean()


def test_cache_of_the_other_variant_is_refused_in_one_line(synth, tmp_path):
    import shutil

    from capcore.errors import CapawareError

    labels_path, _, _ = synth
    labels_copy = tmp_path / "labels.h5"
    shutil.copy(labels_path, labels_copy)
    plain = load_or_build_doc_freq(labels_copy, eos=False)
    with_eos = load_or_build_doc_freq(labels_copy, eos=True)  # by default each variant has its own file
    assert (tmp_path / "cider_df_train.h5").is_file() and (tmp_path / "cider_df_train_eos.h5").is_file()
    assert with_eos.base == plain.base + 1 and with_eos.end_token == plain.base and plain.end_token is None
    with pytest.raises(CapawareError) as err:
        load_or_build_doc_freq(labels_copy, cache=tmp_path / "cider_df_train.h5", eos=True)
    line = str(err.value)
    assert "\n" not in line and "without the end token" in line and "reward.eos is true" in line
    assert "reward.df_cache" in line
    again = load_or_build_doc_freq(labels_copy, cache=tmp_path / "cider_df_train_eos.h5", eos=True)
    assert np.array_equal(again.keys, with_eos.keys) and again.eos


@EOS
def test_rewards_together_equal_the_rewards_apart(synth, eos):
    """An SCST step scores its samples and its greedy captions in one call (widths may differ)."""
    labels_path, labels, _ = synth
    reward = CiderReward(labels, load_or_build_doc_freq(labels_path, eos=eos))
    train = np.flatnonzero(labels.splits == "train")
    samples = np.stack([labels.captions_of(i)[1] for i in np.repeat(train[:4], 3)])
    greedy = np.stack([labels.captions_of(i)[0][:9] for i in train[:4]])  # narrower rows
    got_s, got_g = reward.together((samples, np.repeat(train[:4], 3)), (greedy, train[:4]))
    np.testing.assert_allclose(got_s, reward(samples, np.repeat(train[:4], 3)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_g, reward(greedy, train[:4]), rtol=0, atol=1e-12)
