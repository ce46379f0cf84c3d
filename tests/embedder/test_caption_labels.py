"""Caption label spaces (WMD Eq. 13, tf-idf) against gensim and slow, obvious computations."""
import os
import pickle
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError
from capdata.records import CaptionRecords
from embedder.labels.caption_graph import (
    _Searcher,
    build_caption_graph,
    build_caption_graph_bruteforce,
)
from embedder.labels.caption_space import CaptionSpace
from embedder.labels.graph import read_graph
from embedder.labels.tfidf import TfidfSpace
from embedder.labels.wmd import (
    EMPTY_WMD,
    caption_set_distance,
    pair_lower_bounds,
    prepare_captions,
    rwmd,
    wcd,
    wmd,
    wmd_tokens,
)
from embedder.labels.wordvecs import (
    caption_words,
    load_vectors,
    tokenize,
    train_word2vec,
)

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ["circle", "disc", "square", "box", "triangle", "star", "heart"]
COLOURS = ["red", "green", "blue", "yellow", "purple", "orange"]
SIZES = ["small", "little", "large", "big"]
PLACES = ["on the left", "on the right", "in the middle", "near the corner"]
LEADS = ["a picture of", "there is", "we see", "an image with", ""]


def template_captions(n: int, seed: int = 0) -> list[list[str]]:
    """n images x 5 short varied captions of 1-2 coloured shapes (deterministic)."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(n):
        objs = [(rng.choice(SHAPES), rng.choice(COLOURS), rng.choice(SIZES), rng.choice(PLACES))
                for _ in range(int(rng.integers(1, 3)))]
        caps = []
        for _ in range(5):
            parts = [" ".join(w for w in (s if rng.random() < .5 else "", c, sh, p if rng.random() < .4 else "") if w)
                     for sh, c, s, p in objs if rng.random() < .8] or [f"{objs[0][1]} {objs[0][0]}"]
            caps.append(f"{rng.choice(LEADS)} a " + " and a ".join(parts))
        images.append(caps)
    return images


@pytest.fixture(scope="module")
def kv():
    corpus = [tokenize(s) for caps in template_captions(300, seed=1) for s in caps]
    return train_word2vec(corpus, dim=24, seed=0, epochs=5)


def records(captions) -> CaptionRecords:
    n = len(captions)
    return CaptionRecords([Path(f"/x/{i}.png") for i in range(n)], np.array(["train"] * n),
                          np.arange(n, dtype=np.int64), [[tokenize(s) for s in caps] for caps in captions],
                          [list(caps) for caps in captions], format="karpathy")


# ------------------------------------------------------------------------------------------ WMD
def test_wmd_matches_gensim(kv):
    pairs = [("red circle", "blue square"), ("small red circle red", "big red disc"),
             ("star", "yellow star heart heart"), ("green box left", "green box left"),
             ("purple triangle middle corner", "orange heart")]
    rng = np.random.default_rng(3)
    words = SHAPES + COLOURS + SIZES
    draw = (lambda: " ".join(rng.choice(words, int(rng.integers(1, 7)))))
    pairs += [(draw(), draw()) for _ in range(30)]
    for a, b in pairs:
        ta, tb = a.split(), b.split()
        want = kv.wmdistance(ta, tb)
        assert abs(wmd_tokens(ta, tb, kv) - want) < 1e-6, (a, b)


def test_public_emd2_fallback_gives_the_same_wmd(kv, monkeypatch):
    import embedder.labels.wmd as wmd_module
    p = prepare_captions([s for im in template_captions(4, seed=8) for s in im], kv)
    fast = [wmd(p, i, j) for i in range(5) for j in range(5, 20)]
    monkeypatch.setattr(wmd_module, "_EMD_C", None)  # as if POT's compiled entry point had changed
    slow = [wmd(p, i, j) for i in range(5) for j in range(5, 20)]
    assert np.allclose(fast, slow, rtol=0, atol=1e-12)


def test_caption_set_distance_is_eq13_over_gensim_wmd(kv):
    x, y = template_captions(2, seed=5)
    got = caption_set_distance(x, y, kv)
    tx = [caption_words(s, kv.key_to_index) for s in x]
    ty = [caption_words(s, kv.key_to_index) for s in y]
    pair = np.array([[kv.wmdistance(a, b) for b in ty] for a in tx])
    want = pair.min(axis=1).sum() + pair.min(axis=0).sum()
    assert abs(got - want) < 1e-6
    space = CaptionSpace([x, y], kv)
    assert abs(space.distance(0, 1) - want) < 1e-6
    assert space.pairwise(np.array([0, 1]), np.array([0, 1]))[0, 1] == np.float32(space.distance(0, 1))


def test_wmd_symmetric_and_zero_on_identical(kv):
    caps = [s for im in template_captions(6, seed=2) for s in im]
    p = prepare_captions(caps + caps[:3], kv)
    for i in range(0, len(caps), 3):
        for j in range(1, len(caps), 4):
            assert wmd(p, i, j) == wmd(p, j, i)
        assert wmd(p, i, i) == 0.0
    for i in range(3):  # the same caption again: a different id, the same words
        assert abs(wmd(p, i, len(caps) + i)) < 1e-12
    space = CaptionSpace(template_captions(6, seed=2), kv)
    d = space.pairwise(np.arange(6), np.arange(6))
    assert np.array_equal(d, d.T) and np.all(np.diag(d) == 0) and np.all(d[~np.eye(6, dtype=bool)] > 0)


def test_lower_bounds_never_exceed_exact(kv):
    imgs = template_captions(40, seed=4)
    space = CaptionSpace(imgs, kv)
    p = space.prep
    xs = space.captions_of(0)
    lb = pair_lower_bounds(p, xs, np.arange(len(p)))
    exact = np.array([[wmd(p, int(x), y) for y in range(len(p))] for x in xs])
    assert np.all(lb <= exact + 1e-12)
    for x in xs:
        for y in range(0, len(p), 7):
            assert wcd(p, int(x), y) <= exact[x, y] + 1e-12 and rwmd(p, int(x), y) <= exact[x, y] + 1e-12
            assert abs(lb[x, y] - max(wcd(p, int(x), y), rwmd(p, int(x), y))) < 1e-12
    bounds = _Searcher(space, m=5).set_bounds(0, 4)
    for q in range(4):
        w = np.array([space.distance(q, c) for c in range(len(space))])
        others = np.arange(len(space)) != q
        assert np.all(bounds[q, others] <= w[others] + 1e-12) and np.isinf(bounds[q, q])
        assert np.mean(bounds[q, others] / w[others]) > 0.3  # a bound, and not a useless one


# ---------------------------------------------------------------------------- OOV / empty rules
def test_stopword_fallback_oov_and_empty_caption_rule(kv):
    vocab = kv.key_to_index
    assert caption_words("A red circle on the left", vocab) == ["red", "circle", "left"]
    assert caption_words("there it is on the", {"there", "on", "the"}) == ["there", "on", "the"]  # stop words kept
    assert caption_words("zzz qqq", vocab) == []  # all OOV: empty
    assert caption_words(["Red", "CIRCLE", "zzz"], vocab) == ["red", "circle"]
    p = prepare_captions(["red circle", "zzz qqq", "xxyy", "blue star"], kv)
    assert wmd(p, 0, 1) == EMPTY_WMD and wmd(p, 1, 3) == EMPTY_WMD and wmd(p, 1, 2) == 0.0
    lb = pair_lower_bounds(p, [0, 1], [0, 1, 2, 3])
    assert np.array_equal(lb[1], [EMPTY_WMD, 0.0, 0.0, EMPTY_WMD]) and lb[0, 1] == EMPTY_WMD
    space = CaptionSpace([["red circle", "zzz"], ["qqq"], ["blue star", "red circle"]], kv)
    d = space.pairwise(np.arange(3), np.arange(3))
    assert np.all(np.isfinite(d)) and d[0, 1] == EMPTY_WMD  # rows: 2 + 0 (empty to empty), column: 0
    assert d[1, 2] == 3 * EMPTY_WMD  # the empty caption is 2 from each of the 2 + 1 others
    with pytest.raises(CapawareError, match="no captions"):
        CaptionSpace([["red circle"], []], kv)


# ----------------------------------------------------------------------------------- the graph
def graph_captions() -> list[list[str]]:
    imgs = template_captions(160, seed=7)
    imgs[10] = list(imgs[3])  # identical caption sets: exact ties (W = 0) resolved by index
    imgs[40] = list(imgs[3])
    imgs[20][2] = "qqq zzz"  # an empty caption (all OOV)
    imgs[21][0] = "the of and"  # stop words only: the fallback keeps them (if they have vectors)
    return imgs


def test_pruned_graph_equals_brute_force(kv):
    space = CaptionSpace(graph_captions(), kv)
    pruned = build_caption_graph(space, m=10, workers=1, chunk=64, progress=False)
    brute = build_caption_graph_bruteforce(space, m=10, progress=False)
    assert np.array_equal(pruned.nn_idx, brute.nn_idx)
    assert np.array_equal(pruned.nn_dist, brute.nn_dist)  # bit for bit: the same exact W
    assert np.abs(pruned.nn_dist - brute.nn_dist).max() < 1e-6
    assert pruned.nn_idx[3, :2].tolist() == [10, 40] and pruned.nn_dist[3, 0] == 0
    assert pruned.attrs["emd_solves"] < brute.attrs["emd_solves"] / 2
    assert pruned.stats["brute_force_solves"] == brute.attrs["emd_solves"]
    for q in (0, 20, 77):  # and it is Eq. 13: spot-check against CaptionSpace.distance
        want = sorted((space.distance(q, c), c) for c in range(len(space)) if c != q)[:10]
        assert pruned.nn_idx[q].tolist() == [c for _, c in want]


def test_interrupted_build_resumes_to_an_identical_file(kv, tmp_path):
    space = CaptionSpace(graph_captions()[:90], kv)
    fresh = build_caption_graph(space, m=6, workers=1, chunk=20, path=tmp_path / "fresh.h5", progress=False)
    resume = tmp_path / "resume"
    assert build_caption_graph(space, m=6, workers=1, chunk=20, resume_dir=resume, _chunks=[0, 3],
                               progress=False) is None  # "killed" after two chunks
    done = sorted(resume.glob("caption_graph-*/chunk_*.npz"))
    assert len(done) == 2
    done[1].write_bytes(done[1].read_bytes()[:100])  # a damaged chunk file is recomputed, not trusted
    again = build_caption_graph(space, m=6, workers=2, chunk=20, resume_dir=resume, path=tmp_path / "resumed.h5",
                                progress=False)
    assert again.stats["reused_images"] == 20
    a, b = read_graph(tmp_path / "fresh.h5"), read_graph(tmp_path / "resumed.h5")
    assert np.array_equal(a.nn_idx, b.nn_idx) and np.array_equal(a.nn_dist, b.nn_dist) and a.attrs == b.attrs
    assert a.attrs["label_space"] == "caption_wmd" and a.attrs["m"] == 6
    assert np.array_equal(fresh.nn_idx, a.nn_idx)
    with h5py.File(tmp_path / "resumed.h5") as f:
        assert f["nn_idx"].dtype == np.int32 and f["nn_dist"].dtype == np.float32
    other = build_caption_graph(space, m=5, workers=1, chunk=20, resume_dir=resume, progress=False)
    assert other.stats["reused_images"] == 0 and len(list(resume.glob("caption_graph-*"))) == 2  # never mixed
    assert np.array_equal(other.nn_idx, fresh.nn_idx[:, :5])


class _DiesInWorker(CaptionSpace):
    """Unpickling it (in a spawned graph worker) kills that process, as the OOM killer would."""

    def __setstate__(self, state):
        os._exit(3)


def test_a_killed_graph_worker_raises_instead_of_hanging(kv, tmp_path):
    space = CaptionSpace(graph_captions()[:60], kv)
    space.__class__ = _DiesInWorker
    with pytest.raises(CapawareError, match="worker process died"):
        build_caption_graph(space, m=6, workers=2, chunk=20, resume_dir=tmp_path, progress=False)


def test_caption_space_is_light_and_picklable(kv):
    space = CaptionSpace.from_records(records(template_captions(30, seed=9)), kv, vector_source="test")
    space.pairwise(np.arange(3), np.arange(30))
    assert len(space._cache) > 0
    blob = pickle.dumps(space)
    back = pickle.loads(blob)
    assert back._cache == {} and back._set_cache == {} and len(blob) < 200_000
    assert np.array_equal(back.pairwise(np.arange(3), np.arange(30)), space.pairwise(np.arange(3), np.arange(30)))
    assert space.params()["vector_source"] == "test" and len(space.params()["captions_sha256"]) == 64


def test_image_pair_memo_returns_the_distance_computed_afresh(kv):
    """A batch drawn again (the next row, the head warm-up's steps) reads image-pair distances from the
    memo: they must equal a fresh computation, in both orders, and a full memo must evict, not grow."""
    captions = template_captions(30, seed=4)
    space = CaptionSpace.from_records(records(captions), kv, cache_size=40)
    first = space.pairwise(np.arange(5), np.arange(30))
    assert 0 < len(space._set_cache) <= 40
    again = space.pairwise(np.arange(5), np.arange(30))
    fresh = CaptionSpace.from_records(records(captions), kv).pairwise(np.arange(30), np.arange(5)).T
    assert np.array_equal(first, again) and np.array_equal(first, fresh)


# -------------------------------------------------------------------------------- word vectors
def test_word2vec_is_deterministic_across_processes(tmp_path):
    corpus = [tokenize(s) for caps in template_captions(50, seed=2) for s in caps]
    a = train_word2vec(corpus, dim=16, seed=3, epochs=3)
    b = train_word2vec(corpus, dim=16, seed=3, epochs=3)
    assert a.index_to_key == b.index_to_key and np.array_equal(a.vectors, b.vectors)
    assert not np.array_equal(a.vectors, train_word2vec(corpus, dim=16, seed=4, epochs=3).vectors)
    out = tmp_path / "other.npy"
    code = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1]); "
            "from tests.embedder.test_caption_labels import *; "
            "c = [tokenize(s) for caps in template_captions(50, seed=2) for s in caps]; "
            "np.save(sys.argv[2], train_word2vec(c, dim=16, seed=3, epochs=3).vectors)")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(out)], check=True, env=env, cwd=ROOT)
    assert np.array_equal(np.load(out), a.vectors)


def test_load_vectors_formats_and_errors(kv, tmp_path):
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    kv.save_word2vec_format(str(tmp_path / "v.txt"), binary=False)
    lines = (tmp_path / "v.txt").read_text().splitlines()[1:]  # GloVe: the same without the header
    (tmp_path / "glove.txt").write_text("\n".join(lines) + "\n")
    for name in ("v.bin", "v.txt", "glove.txt"):
        got = load_vectors(tmp_path / name)
        assert got.index_to_key == kv.index_to_key
        assert np.allclose(got.vectors, kv.vectors, atol=1e-5)
    assert len(load_vectors(tmp_path / "v.bin", limit=5)) == 5
    with pytest.raises(CapawareError, match="not found"):
        load_vectors(tmp_path / "missing.bin")
    (tmp_path / "bad.bin").write_bytes(b"\x00\x01garbage")
    with pytest.raises(CapawareError, match="cannot read"):
        load_vectors(tmp_path / "bad.bin")
    (tmp_path / "bad.txt").write_text("2 3\nred 1 2\n")
    with pytest.raises(CapawareError, match="bad.txt"):
        load_vectors(tmp_path / "bad.txt")


# ------------------------------------------------------------------------------------- tf-idf
def test_tfidf_distance_matches_numpy():
    imgs = template_captions(25, seed=6)
    train = np.arange(25) < 18
    space = TfidfSpace(imgs, train, stem=False)
    bags = [[t for s in caps for t in tokenize(s)] for caps in imgs]
    vocab = sorted({t for b, tr in zip(bags, train) if tr for t in b})
    df = np.array([sum(w in b for b, tr in zip(bags, train) if tr) for w in vocab])
    idf = np.log(train.sum() / df)
    tf = np.array([[b.count(w) for w in vocab] for b in bags], float)
    x = tf * idf
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
    want = np.sqrt(np.maximum(2 - 2 * x @ x.T, 0))
    np.fill_diagonal(want, 0)
    got = space.pairwise(np.arange(25), np.arange(25))
    assert got.dtype == np.float32 and np.abs(got - want).max() < 1e-6
    stemmed = TfidfSpace.from_records(records(imgs))
    assert "circl" in stemmed.vocab and stemmed.params()["stem"] == "snowball-english"
    lone = TfidfSpace([["red circle"], ["zzz"]], np.array([True, False]))
    assert lone.pairwise(np.arange(2), np.arange(2))[0, 1] == pytest.approx(np.sqrt(2))
