"""Stage three units: prepro round trip, feature+label dataset, cores, XE overfit, decoders.

Tiny sizes throughout (a few images, hidden sizes of 8-32) so the file runs in seconds on 2 cores.
"""
import itertools
import json
import os
import pickle
import warnings
from collections import Counter
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from tests.pipeline_helpers import ROOT
from captioners.batch_slots import PREFETCH, BatchSlots, take
from captioners.data import (
    CaptionDataset,
    EpochBatches,
    RunBatches,
    collate,
    loader,
    on_device,
)
from captioners.config import load_captioner_config
from captioners.decoding import (
    beam_search,
    decode,
    greedy,
    sample_loop,
    sequence_logprob,
)
from captioners.model import Captioner, Encoded, caption_mask, xe_loss
from captioners.prepro import (
    UNK,
    build_vocab,
    decode_sequence,
    prepro,
    read_labels,
    read_vocab,
)
from captioners.speed import apply_compile
from feature_extract.h5io import read_feats_info
from tests.fixtures_builders import write_karpathy

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from capdata.synthetic import generate_captions

    root = tmp_path_factory.mktemp("capsynth")
    json_path = generate_captions(root / "data", n_train=12, n_test=4, seed=0, size=32)
    prepro(json_path, root / "prep", threshold=5, max_length=16)
    return root, json_path


def write_feats(path, image_ids, regions=4, dim=8, seed=0, complete=True, dtype=np.float16):
    """A synthetic feats.h5 (docs/design.md); fc[:, 0] carries the image id so a test can check the join."""
    rng = np.random.default_rng(seed)
    ids = np.asarray(image_ids, dtype=np.int64)
    att = rng.standard_normal((len(ids), regions, dim)).astype(dtype)
    fc = att.astype(np.float32).mean(1)
    fc[:, 0] = ids
    with h5py.File(path, "w") as f:
        f.create_dataset("att", data=att, chunks=(1, regions, dim))
        f.create_dataset("fc", data=fc.astype(np.float32))
        f.create_dataset("image_id", data=ids)
        f.attrs["complete"] = complete
    return path


def tiny_caption_set(root: Path) -> tuple[Path, Path]:
    """16 synthetic training images + 4 test, prepro'd (threshold 1) into root/prep, and a 2 x 2 x 8
    feats.h5 (``att_grid`` set) holding every image: what the captioner, SCST and DDP tests start from."""
    from capdata.synthetic import generate_captions

    json_path = generate_captions(root / "data", n_train=16, n_test=4, seed=0, size=32)
    prepro(json_path, root / "prep", threshold=1, max_length=16)
    feats = write_feats(root / "img.h5", read_labels(root / "prep" / "labels.h5").image_ids)
    with h5py.File(feats, "a") as f:
        f.attrs["att_grid"] = [2, 2]
    return json_path, feats


# ----------------------------------------------------------------------------------------- prepro

def test_prepro_hand_checked_vocab_and_labels(tmp_path):
    json_path = write_karpathy(tmp_path / "k", write_images=False)
    prepro(json_path, tmp_path / "p", threshold=1, max_length=3)
    vocab = read_vocab(tmp_path / "p" / "vocab.json")
    # train + restval captions: "a" is seen 3 times, every other word once -> only "a" survives threshold 1
    assert vocab == ["", "a", UNK]
    lab = read_labels(tmp_path / "p" / "labels.h5")
    assert lab.image_ids.tolist() == [9, 42, 73, 74]
    assert lab.splits.tolist() == ["train", "train", "val", "test"]  # restval trains
    assert (lab.end_ix - lab.start_ix).tolist() == [2, 1, 3, 1]
    val = [decode_sequence(vocab, s) for s in lab.captions_of(2)]
    assert val == ["a UNK UNK", "a UNK UNK", "UNK UNK"]  # truncated to 3 words, unseen words -> UNK
    assert lab.lengths[lab.start_ix[2]:lab.end_ix[2]].tolist() == [3, 3, 2]


def test_unk_threshold_is_seen_at_most_threshold_times():
    caps = [["dog"] * 6, ["cat"] * 5, ["owl"]]  # dog 6 times, cat 5, owl once
    assert build_vocab(caps, threshold=5) == ["dog", UNK]  # 5 = threshold -> UNK; 6 > threshold -> kept
    assert build_vocab(caps, threshold=4) == ["dog", "cat", UNK]
    assert build_vocab(caps, threshold=0) == ["dog", "cat", "owl", UNK]  # most frequent first
    vocab = [""] + build_vocab(caps, threshold=5)
    assert decode_sequence(vocab, [1, 2, 0, 1]) == "dog UNK"  # stops at the first 0


def test_prepro_round_trip_on_synthetic_set(synth):
    root, json_path = synth
    vocab = read_vocab(root / "prep" / "vocab.json")
    lab = read_labels(root / "prep" / "labels.h5")
    data = json.loads(json_path.read_text())["images"]
    train = [s for im in data if im["split"] in ("train", "restval") for s in im["sentences"]]
    counts = Counter(w for s in train for w in s["tokens"])
    kept = {w for w, c in counts.items() if c > 5}
    assert set(vocab[1:-1]) == kept and vocab[-1] == UNK
    assert [counts[w] for w in vocab[1:-1]] == sorted((counts[w] for w in vocab[1:-1]), reverse=True)
    assert lab.labels.shape[1] == 16
    for i, im in enumerate(data):
        assert lab.image_ids[i] == im["cocoid"]
        decoded = [decode_sequence(vocab, s) for s in lab.captions_of(i)]
        expected = [" ".join(w if w in kept else UNK for w in s["tokens"][:16]) for s in im["sentences"]]
        assert decoded == expected


# ---------------------------------------------------------------------------------------- dataset

def test_dataset_joins_by_image_id_and_returns_the_five_captions(synth, tmp_path):
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    ids = np.concatenate([lab.image_ids[::-1], [999]])  # other order, an extra image: joined by id
    feats = write_feats(tmp_path / "feats.h5", ids)
    for in_memory in (False, True):
        ds = CaptionDataset(feats, lab, "train", seq_per_img=5, in_memory=in_memory)
        train_rows = np.flatnonzero(lab.splits == "train")
        assert len(ds) == len(train_rows)
        for k, j in enumerate(train_rows):
            item = ds[k]
            assert item["image_id"] == lab.image_ids[j]
            assert item["fc"][0] == lab.image_ids[j]  # the features of that very image
            assert np.array_equal(item["labels"], lab.captions_of(j))
            assert item["labels"].shape == (5, 16) and item["att"].shape == (4, 8)
    batch = collate([ds[0], ds[1]])
    assert batch["labels"].shape == (2, 5, 16) and batch["att"].dtype == torch.float16  # the file's own dtype
    fc, att = on_device(batch, torch.device("cpu"))  # float32, cast where the model runs
    assert att.dtype == fc.dtype == torch.float32
    assert torch.equal(att, torch.from_numpy(np.stack([ds[0]["att"], ds[1]["att"]]).astype(np.float32)))


def test_dataset_opens_hdf5_once_per_process(synth, tmp_path, monkeypatch):
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    ds = CaptionDataset(write_feats(tmp_path / "feats.h5", lab.image_ids), lab, "train")
    opened = []
    real = h5py.File
    monkeypatch.setattr("captioners.data.h5py.File", lambda *a, **k: opened.append(a) or real(*a, **k))
    for _ in range(2):
        for k in range(len(ds)):
            ds[k]
    assert len(opened) == 1
    clone = pickle.loads(pickle.dumps(ds))  # what a worker receives: no handle, opens its own
    assert clone._file is None and clone[0]["image_id"] == ds[0]["image_id"]


def test_dataloader_workers_give_the_same_batches(synth, tmp_path):
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    ds = CaptionDataset(write_feats(tmp_path / "feats.h5", lab.image_ids), lab, "train")
    runs = [[b for b in loader(ds, EpochBatches(len(ds), 4, seed=0, epoch=1), workers)] for workers in (0, 2)]
    assert len(runs[0]) == len(runs[1]) == 3
    for a, b in zip(*runs):
        assert torch.equal(a["att"], b["att"]) and torch.equal(a["labels"], b["labels"])
    resumed = list(EpochBatches(len(ds), 4, seed=0, epoch=1, start=1))
    assert resumed == list(EpochBatches(len(ds), 4, seed=0, epoch=1))[1:]


def test_dataset_samples_captions_when_an_image_has_fewer(tmp_path):
    json_path = write_karpathy(tmp_path / "k", write_images=False)
    prepro(json_path, tmp_path / "p", threshold=0)
    lab = read_labels(tmp_path / "p" / "labels.h5")
    ds = CaptionDataset(write_feats(tmp_path / "f.h5", lab.image_ids), lab, "val", seq_per_img=5, seed=3)
    caps = ds[(2, 0)]["labels"]
    own = {tuple(c) for c in lab.captions_of(2)}
    assert caps.shape[0] == 5 and {tuple(c) for c in caps} <= own
    assert np.array_equal(caps, ds[(2, 0)]["labels"])  # seeded by (seed, epoch, image)


def test_feature_file_problems_are_clear_errors(synth, tmp_path):
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    with pytest.raises(CapawareError, match="incomplete"):
        read_feats_info(write_feats(tmp_path / "half.h5", lab.image_ids, complete=False))
    with pytest.raises(CapawareError, match=r"2 of \d+ train images .* have no features"):
        CaptionDataset(write_feats(tmp_path / "few.h5", lab.image_ids[2:]), lab, "train")
    with pytest.raises(CapawareError, match="not found"):
        read_feats_info(tmp_path / "nope.h5")


# ------------------------------------------------------------------------------------------ model

TINY_TRANSFORMER = {"layers": 2, "heads": 2, "ff_size": 32}


def tiny_model(core, vocab=6, dim=8, hidden=16, seed=0, drop=0.0):
    torch.manual_seed(seed)
    return Captioner(core, vocab, dim, dim, input_encoding_size=12, rnn_size=hidden, att_hid_size=10,
                     drop_prob_lm=drop, core_args=TINY_TRANSFORMER if core == "transformer" else None)


@pytest.mark.parametrize("core,layers", [("att2all2", 1), ("topdown", 2)])
def test_core_one_step_shapes_and_gradient_flow(core, layers):
    model = tiny_model(core, drop=0.1)
    B, L = 3, 5
    fc, att = torch.randn(B, 8), torch.randn(B, L, 8)
    enc = model.encode(fc, att)
    state = model.init_state(B)
    logp, state, alpha = model.step(torch.tensor([0, 2, 5]), enc, state)
    assert logp.shape == (B, 7) and alpha.shape == (B, L)
    assert all(s.shape == (layers, B, 16) for s in state)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(B)) and torch.allclose(alpha.sum(-1), torch.ones(B))
    seq = torch.tensor([[[1, 2, 3, 0], [4, 0, 0, 0]]] * B)  # [B, 2 captions, 4]
    loss = xe_loss(model(fc, att, seq), seq.view(-1, 4))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_transformer_steps_one_word_at_a_time_as_its_teacher_forced_pass_computes():
    """The decoders' one-word steps (a cache of what each layer saw) and XE's causal all-at-once pass are one
    function of the words so far; gradients reach every parameter, the encoder included."""
    model = tiny_model("transformer", drop=0.1)
    B, L, T = 3, 5, 6
    fc, att = torch.randn(B, 8), torch.randn(B, L, 8)
    seq = torch.randint(1, 7, (B, 2, T))
    seq[0, :, 3:] = 0
    loss = xe_loss(model(fc, att, seq), seq.view(-1, T))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    model.eval()
    forced = model(fc, att, seq)
    enc, state, words = model.encode(fc, att).repeat(2), model.init_state(2 * B), torch.zeros(2 * B, dtype=torch.long)
    for t in range(T + 1):
        if t:
            words = seq.view(2 * B, T)[:, t - 1]
        logp, state, alpha = model.step(words, enc, state)
        torch.testing.assert_close(logp, forced[:, t], rtol=1e-5, atol=1e-5)
        assert all(s.shape == (2 * B, t + 1, 16) for s in state) and alpha.shape == (2 * B, L)
        torch.testing.assert_close(alpha.sum(-1), torch.ones(2 * B))
    rows = torch.tensor([5, 0, 0])
    assert all(torch.equal(a, b[rows]) for a, b in zip(model.select_state(state, rows), state))
    layer, x, memory = model.core.decoder[0], torch.randn(2, 3, 16), torch.randn(2, L, 16)
    out, alpha = layer.attend_grid(x, layer.grid_memory(memory))  # the grid's keys and values projected once
    want, want_alpha = layer.grid_attn(x, memory, memory)  # torch's module, on the same parameters
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(alpha, want_alpha, rtol=1e-5, atol=1e-6)


def test_the_core_list_is_written_once_in_the_product():
    """Only captioners/core_registry.py names the cores together: every other list derives from its table."""
    import ast

    names = {"att2all2", "topdown", "transformer"}
    together = []
    product = ("capaware", "capcore", "capdata", "captioners", "embedder", "joint", "feature_extract", "rl", "eval")
    for path in [p for package in product for p in sorted(ROOT.glob(f"{package}/**/*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                found = {k.value for k in items if isinstance(k, ast.Constant) and k.value in names}
                if len(found) >= 2:
                    together.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert together == [], together
    from captioners.core_registry import CORES

    assert set(CORES) >= names and all(e.core_class().__name__ for e in CORES.values())


def test_a_registered_core_is_checked_built_and_tabled_with_no_other_edit(tmp_path):
    from captioners.core_registry import CORES, register_core
    from eval.reporting.results_table import display_name, sort_rows

    register_core("toy_topdown", "captioners.cores:TopDownCore", display="Toy Top-Down")
    try:
        cfg = load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml", ["model.core=toy_topdown"])
        model = Captioner(cfg.model.core, 6, 8, 8, 8, 16, 8, 0.0)
        assert type(model.core).__name__ == "TopDownCore" and display_name("toy_topdown") == "Toy Top-Down"
        rows = [{"core": c, "features": "Img", "training": "XE"} for c in ("toy_topdown", "topdown", "att2all2")]
        assert [r["core"] for r in sort_rows(rows)] == ["att2all2", "topdown", "toy_topdown"]  # registration order
        with pytest.raises(CapawareError, match="model.core_args.depth: is not a setting of the toy_topdown core"):
            load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml", ["model.core=toy_topdown",
                                                                            "model.core_args.depth=2"])
    finally:
        del CORES["toy_topdown"]
    with pytest.raises(CapawareError, match="unknown core 'toy_topdown'"):
        Captioner("toy_topdown", 6, 8, 8, 8, 16, 8, 0.0)


@pytest.mark.skipif(bool(os.environ.get("ATEN_CPU_CAPABILITY")),
                    reason="under an ATEN_CPU_CAPABILITY cap below the CPU's own, the compiled core's loss is NaN "
                           "with torch 2.14.1 (seen on a Zen 5 held to avx2; eager is fine): a cap artefact")
def test_compiled_core_gives_the_eager_loss_gradients_and_state_dict():
    """train.compile (captioners/speed.py) changes how the core runs, not what it computes or saves."""
    eager = tiny_model("att2all2")
    compiled = tiny_model("att2all2")
    apply_compile(compiled)
    assert list(compiled.state_dict()) == list(eager.state_dict())  # checkpoints stay interchangeable
    fc, att = torch.randn(3, 8), torch.randn(3, 5, 8)
    seq = torch.tensor([[[1, 2, 3, 0], [4, 0, 0, 0]]] * 3)
    grads = []
    for model in (eager, compiled):
        loss = xe_loss(model(fc, att, seq), seq.view(-1, 4))
        loss.backward()
        grads.append((loss.detach(), [p.grad for p in model.parameters()]))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
    for a, b in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_caption_mask_covers_words_and_one_eos():
    mask = caption_mask(torch.tensor([[5, 6, 0, 0], [1, 2, 3, 4]]))
    assert mask.tolist() == [[True, True, True, False, False], [True] * 5]


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_xe_loss_decreases_when_overfitting_eight_images(core):
    torch.manual_seed(0)
    model = tiny_model(core, vocab=10, hidden=32)
    fc, att = torch.randn(8, 8), torch.randn(8, 4, 8)
    seq = torch.randint(1, 11, (8, 2, 6))
    seq[:, :, 4:] = 0
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(40):
        loss = xe_loss(model(fc, att, seq, ss_prob=0.1 if step % 2 else 0.0), seq.view(-1, 6), label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_overfits_eight_images_then_greedy_decodes_their_captions_exactly(core):
    """One caption per image, so 'the' caption of an image is well defined and greedy must find it."""
    model = tiny_model(core, vocab=10, hidden=32, seed=0)
    fc, att = torch.randn(8, 8), torch.randn(8, 4, 8)
    g = torch.Generator().manual_seed(1)
    seq = torch.zeros(8, 1, 6, dtype=torch.long)
    for i, n in enumerate([3, 4, 5, 3, 4, 5, 2, 6]):  # 6 words: a caption ended by max_len, not by EOS
        seq[i, 0, :n] = torch.randint(1, 11, (n,), generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        loss = xe_loss(model(fc, att, seq), seq.view(-1, 6))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    decoded = greedy(model.eval(), fc, att, max_len=6).seq
    assert decoded.tolist() == seq[:, 0].tolist()


# --------------------------------------------------------------------------------------- decoding

def peaked_model(core, vocab=3, seed=0):
    """A random tiny model with sharpened outputs, so decoders disagree unless they are right."""
    model = tiny_model(core, vocab=vocab, seed=seed).eval()
    with torch.no_grad():
        model.logit.weight.mul_(6.0)
    return model


class PrefixTableModel:
    """A 'captioner' whose log-probabilities are drawn at random for every (image, prefix): nothing is
    smooth, so greedy, narrow beams and the true optimum disagree and every length (early EOS
    included) can win, which a small random LSTM rarely shows (its optimum is nearly always the
    empty caption). Same interface as Captioner: encode, init_state, select_state, step. Its state is an
    LSTM-like (h, c) pair, batch in dim 1."""

    def __init__(self, n_images: int, vocab: int, max_len: int, seed: int = 0, scale: float = 1.5):
        g = torch.Generator().manual_seed(seed)
        self.base, self.size = vocab + 1, (vocab + 1) ** max_len
        self.table = torch.log_softmax(scale * torch.randn(n_images, self.size, vocab + 1, generator=g), -1)

    def encode(self, fc, att):
        idx = torch.arange(fc.size(0), dtype=torch.float32).view(-1, 1, 1)  # the image, carried as 'att'
        return Encoded(None, idx, idx)

    def init_state(self, n):
        return torch.zeros(1, n, 1, dtype=torch.long), torch.zeros(1, n, 1, dtype=torch.long)

    def select_state(self, state, rows):
        return tuple(s[:, rows] for s in state)

    def code(self, prefix) -> int:
        """The table row of a prefix (BOS = 0 adds a leading zero digit, so it does not change it)."""
        c = 0
        for w in prefix:
            c = c * self.base + w
        return c

    def step(self, words, enc, state):
        code = (state[0][0, :, 0] * self.base + words) % self.size  # ended rows wrap; their output is unused
        image = enc.att[:, 0, 0].long()
        return self.table[image, code], (code.view(1, -1, 1), state[1]), torch.ones(len(words), 1)

    def score(self, image: int, words: tuple, max_len: int) -> float:
        """Exact log-probability of a caption: its words, then EOS unless it fills max_len."""
        target = list(words) + ([0] if len(words) < max_len else [])
        return sum(self.table[image, self.code(words[:t]), w].item() for t, w in enumerate(target))


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer", "table"])
def test_beam_one_equals_greedy(core):
    model = PrefixTableModel(5, 6, 7) if core == "table" else peaked_model(core, vocab=6)
    fc, att = torch.randn(5, 8), torch.randn(5, 4, 8)
    g, b = greedy(model, fc, att, max_len=7), beam_search(model, fc, att, beam_size=1, max_len=7)
    assert torch.equal(g.seq, b.seq)
    assert torch.allclose(g.logprob, b.logprob, atol=1e-5)
    assert torch.allclose(g.alpha, b.alpha, atol=1e-6)


def reference_logprob(model, fc, att, words, max_len):
    """Score of one word list by teacher forcing (independent of the decoders' code)."""
    seq = torch.tensor([list(words) + [0] * (max_len - len(words))])
    logp = model(fc[None], att[None], seq[None])[0]  # [max_len + 1, V + 1]
    target = list(words) + ([0] if len(words) < max_len else [])
    return sum(logp[t, w].item() for t, w in enumerate(target))


def every_caption(V: int, T: int) -> list[tuple]:
    """All 1 + V + ... + V^T captions: lengths 0..T (a shorter one ends with EOS), words 1..V."""
    return [w for n in range(T + 1) for w in itertools.product(range(1, V + 1), repeat=n)]


def test_wide_beam_is_exhaustive_search_on_a_four_word_vocabulary():
    V, T, N = 4, 3, 16  # 85 captions per image; a beam of V^T = 64 holds all 1 + V + V^2 = 21 prefixes
    model = PrefixTableModel(N, V, T, seed=0)
    fc, att = torch.zeros(N, 1), torch.zeros(N, 1, 1)
    full = beam_search(model, fc, att, beam_size=V ** T, max_len=T)
    narrow, g = beam_search(model, fc, att, beam_size=2, max_len=T), greedy(model, fc, att, T)
    best_lengths, greedy_misses, narrow_misses = set(), 0, 0
    for b in range(N):
        scores = {w: model.score(b, w, T) for w in every_caption(V, T)}
        best = max(scores, key=scores.get)
        assert tuple(t for t in full.seq[b].tolist() if t) == best
        assert full.logprob[b].item() == pytest.approx(scores[best], abs=1e-5)
        best_lengths.add(len(best))
        greedy_misses += tuple(t for t in g.seq[b].tolist() if t) != best
        narrow_words = tuple(t for t in narrow.seq[b].tolist() if t)
        assert narrow.logprob[b].item() == pytest.approx(scores[narrow_words], abs=1e-5)
        narrow_misses += narrow_words != best
    # the case is not trivial: early EOS wins somewhere, and greedy / beam 2 miss the optimum somewhere
    assert best_lengths & {1, 2} and greedy_misses > 0 and narrow_misses > 0
    assert torch.allclose(sequence_logprob(model, fc, att, full.seq, T), full.logprob, atol=1e-5)


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_beam_search_finds_the_most_probable_sequence(core):
    V, T = 4, 3
    model = peaked_model(core, vocab=V, seed=1)
    fc, att = torch.randn(2, 8), torch.randn(2, 4, 8)
    full = beam_search(model, fc, att, beam_size=V ** T, max_len=T)  # wide enough to hold every prefix
    narrow = beam_search(model, fc, att, beam_size=2, max_len=T)
    for b in range(2):
        scores = {w: reference_logprob(model, fc[b], att[b], w, T) for w in every_caption(V, T)}
        best = max(scores, key=scores.get)
        found = tuple(t for t in full.seq[b].tolist() if t)
        assert found == best
        assert full.logprob[b].item() == pytest.approx(scores[best], abs=1e-4)
        narrow_words = tuple(t for t in narrow.seq[b].tolist() if t)
        assert narrow.logprob[b].item() == pytest.approx(scores[narrow_words], abs=1e-4)
        assert narrow.logprob[b].item() <= scores[best] + 1e-5
    assert torch.allclose(sequence_logprob(model, fc, att, full.seq, T), full.logprob, atol=1e-4)


def test_sampling_is_seeded_and_temperature_sharpens():
    model = peaked_model("topdown", vocab=6)
    fc, att = torch.randn(64, 8), torch.randn(64, 4, 8)
    a = sample_loop(model, fc, att, 6, 1.0, torch.Generator().manual_seed(0))
    b = sample_loop(model, fc, att, 6, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(a.seq, b.seq)
    cold = decode(model, fc, att, "sample", temperature=1e-4, max_len=6, generator=torch.Generator().manual_seed(1))
    assert torch.equal(cold.seq, greedy(model, fc, att, 6).seq)
    with pytest.raises(ValueError):
        decode(model, fc, att, "nucleus")


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_learned_cell_positions_tell_identical_cells_apart(core):
    """model.att_position: with every cell's feature equal, attention can only tell cells apart by position."""
    torch.manual_seed(0)
    model = Captioner(core, 6, 8, 8, 8, 16, 8, 0.0, att_cells=4,
                      core_args=TINY_TRANSFORMER if core == "transformer" else None).eval()
    fc, att = torch.randn(2, 8), torch.randn(2, 1, 8).expand(2, 4, 8).contiguous()
    words, state = torch.tensor([1, 2]), model.init_state(2)
    _, _, alpha = model.step(words, model.encode(fc, att), state)
    torch.testing.assert_close(alpha, torch.full_like(alpha, 0.25))  # zero-initialised: the plain model's start
    with torch.no_grad():
        model.att_pos.copy_(torch.randn(4, 16))
    _, _, alpha = model.step(words, model.encode(fc, att), state)
    assert alpha.std(1).min() > 1e-3  # the same features, now weighted by where they are
    logp, _, _ = model.step(words, model.encode(fc, att), state)
    logp.sum().backward()
    assert model.att_pos.grad is not None and model.att_pos.grad.abs().sum() > 0
    copy = Captioner(**model.args)  # the card's model_args rebuild it, positions included
    copy.load_state_dict(model.state_dict())
    torch.testing.assert_close(copy.eval().step(words, copy.encode(fc, att), state)[0], logp.detach())
    with pytest.raises(CapawareError, match="5 grid cells.*positions for 4"):
        model.encode(fc, torch.randn(2, 5, 8))
    if core != "transformer":
        assert not {"att_cells", "core_args"} & set(Captioner(core, 6, 8, 8, 8, 16, 8, 0.0).args)  # older cards stay


class LoaderSpy(CaptionDataset):
    """A dataset that says which loader process read each batch, and into which buffer: ``spy`` = [pid, address]."""

    def __getitems__(self, keys):
        batch = super().__getitems__(keys)
        att = batch["att"]
        batch["spy"] = torch.tensor([os.getpid(),
                                     att.untyped_storage().data_ptr() + att.storage_offset() * att.element_size()])
        return batch


def run_long_loader(synth, tmp_path):
    """(dataset, its RunBatches, a persistent 2-worker loader over them), as the captioners' training builds one."""
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    ds = LoaderSpy(write_feats(tmp_path / "feats.h5", lab.image_ids), lab, "train")
    run = RunBatches()
    return ds, run, loader(ds, run, num_workers=2, persistent=True)


def test_a_run_long_loader_keeps_its_workers_across_epochs_and_gives_each_epochs_batches(synth, tmp_path):
    ds, run, dl = run_long_loader(synth, tmp_path)
    pids, orders = [], []
    for epoch in (1, 2):
        batches = run.use(EpochBatches(len(ds), 4, seed=0, epoch=epoch))
        got = list(dl)
        pids.append({int(b["spy"][0]) for b in got})
        orders.append([b["index"].tolist() for b in got])
        assert orders[-1] == [[i for _, i in keys] for keys in batches]  # this epoch's batches, in order
    assert orders[0] != orders[1]  # epochs differ
    assert pids[0] == pids[1] and os.getpid() not in pids[0]  # the same worker processes read both epochs
    fresh = loader(ds, EpochBatches(len(ds), 4, seed=0, epoch=1), num_workers=2)
    assert {int(b["spy"][0]) for b in fresh}.isdisjoint(pids[0])  # a loader per epoch: new ones


def test_a_batch_read_whole_equals_the_images_read_one_by_one(synth, tmp_path):
    root, _ = synth
    lab = read_labels(root / "prep" / "labels.h5")
    ds = CaptionDataset(write_feats(tmp_path / "feats.h5", lab.image_ids), lab, "train")
    keys = [(3, 5), (3, 0), (3, 2), (3, 5)]  # epoch 3's captions, an image twice, out of file order
    whole, one_by_one = ds.__getitems__(keys), collate([ds[k] for k in keys])
    assert sorted(whole) == sorted(one_by_one)
    for name in whole:
        assert whole[name].dtype == one_by_one[name].dtype and torch.equal(whole[name], one_by_one[name]), name


def test_loader_workers_reuse_a_few_shared_buffers_and_the_loop_owns_every_batch_it_is_handed(synth, tmp_path):
    ds, run, dl = run_long_loader(synth, tmp_path)
    held, epochs = [], []
    for epoch in (1, 2, 3):  # 6 batches an epoch: 9 batches for each worker over the run
        epochs.append(list(run.use(EpochBatches(len(ds), 2, seed=0, epoch=epoch))))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no batch needed reading again
            held += list(dl)
    assert not ds.slotted  # the loader's copy of the dataset uses slots; the caller's is as it was
    keys = [k for batches in epochs for k in batches]
    for b, k in zip(held, keys, strict=True):  # every batch the loop kept still holds what its images hold
        assert not b["att"].is_shared() and "slot" not in b
        assert (torch.equal(b["att"], collate([ds[i] for i in k])["att"])
                and torch.equal(b["fc"], ds.read_rows(b["index"])["fc"]))
    buffers = {}
    for b in held:
        pid, where = b["spy"].tolist()
        buffers.setdefault(pid, []).append(where)
    assert len(buffers) == 2 and os.getpid() not in buffers
    for used in buffers.values():  # each worker cycles through PREFETCH + 1 buffers
        assert len(used) == 9 and len(set(used)) == PREFETCH + 1
        assert used == [used[i % (PREFETCH + 1)] for i in range(9)]


def test_a_batch_whose_slot_is_written_again_before_it_is_taken_is_read_again_with_a_warning():
    slots = BatchSlots(count=2)
    rows = {"att": ((3,), torch.float16)}
    view, stamp = slots.claim(rows, 2)
    view["att"].fill_(1)
    slots.seal(stamp)
    batch = {"att": view["att"], "index": torch.tensor([4, 5]), "slot": stamp}
    again = []

    def read_again(index):
        again.append(index.tolist())
        return {"att": torch.ones(2, 3, dtype=torch.float16)}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        intact = take(dict(batch), copied=False, read_again=read_again)  # not written again: copied out, no re-read
    view["att"].fill_(3)  # the slot changes after the take; what the loop holds does not
    assert torch.equal(intact["att"], torch.ones(2, 3, dtype=torch.float16)) and again == [] and "slot" not in intact
    for _ in range(2):  # the ring comes round: slot 0 holds a newer batch
        newer, s = slots.claim(rows, 2)
        newer["att"].fill_(7)
        slots.seal(s)
    with pytest.warns(RuntimeWarning, match="read again"):
        got = take(dict(batch), copied=False, read_again=read_again)
    assert again == [[4, 5]] and torch.equal(got["att"], torch.ones(2, 3, dtype=torch.float16))
    partly, s = slots.claim(rows, 2)  # a slot being written (stamp -1) is not intact either
    assert not s.intact() and s.names == ("att",)
