"""SCST math (rl/scst_loss.py) and loop (rl/scst.py): the two baselines as defined, the log-likelihood term
(words + EOS, nothing after), SCST raising the *exact* expected CIDEr-D of a toy captioner, and a killed
RL run resuming to the uninterrupted run's checkpoints. Tiny sizes, one thread."""
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from capcore.errors import CapawareError
from captioners.decoding import greedy, sequence_logprob
from captioners.model import Captioner
from captioners.prepro import Labels
from rl.cider import CiderReward, build_doc_freq
from rl.config import load_scst_config
from rl.scst_loss import (
    baseline,
    greedy_captions,
    mean_of_others,
    sample_captions,
    scst_loss,
)
from rl.signature import SCSTSignature, references_sha256, signature_of
from tests.tensorboard_log import tb_steps

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------ math

def test_mean_baseline_is_the_mean_of_the_other_samples():
    r = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    expect = np.array([[2.5, 2.0, 1.5], [3.0, 3.0, 0.0]])
    np.testing.assert_allclose(mean_of_others(r), expect)
    np.testing.assert_allclose(baseline("mean", r), expect)
    with pytest.raises(ValueError):
        mean_of_others(np.ones((2, 1)))
    r = np.random.default_rng(0).random((7, 5))  # against a direct loop: drop the sample, average the rest
    direct = [[np.mean([r[i, k] for k in range(5) if k != j]) for j in range(5)] for i in range(7)]
    np.testing.assert_allclose(mean_of_others(r), direct, rtol=0, atol=1e-12)


def test_signature_round_trips_and_names_each_variant():
    cases = [(True, "mean", 5, 1.0, 0.5), (False, "greedy", 1, 0.0, 1.0), (True, "greedy", 16, 0.25, 2.0)]
    for eos, base, n, xe, t in cases:
        sig = SCSTSignature(eos=eos, baseline=base, samples=n, df="train@0123abcd", xe_weight=xe, temperature=t)
        text = str(sig)
        assert SCSTSignature.parse(text) == sig
        assert text.startswith("Standard_wInit" if eos else "No<Eos>_wInit")
        assert f"{'average' if base == 'mean' else 'greedy'}[nspi{n}]" in text and "Cider-D[n4,s6]" in text
    assert str(SCSTSignature(True, "mean", 5, "train@0123abcd", 1.0, 0.5)) == \
        "Standard_wInit+Cider-D[n4,s6]+average[nspi5]+df[train@0123abcd]+xe[1]+t[0.5]"
    with pytest.raises(ValueError, match="not an SCST signature"):
        SCSTSignature.parse("Standard_wInit+Cider-D[n4,s6]")


def test_signature_of_a_config_follows_its_settings():
    cfg = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["reward.eos=false", "train.baseline=greedy"])
    sig = signature_of(cfg, "ab" * 32)
    assert (sig.eos, sig.baseline, sig.samples, sig.df) == (False, "greedy", 5, "train@abababab")


def test_references_digest_follows_the_captions_not_where_the_file_lies(tmp_path):
    import dataclasses

    labels = Labels(labels=np.array([[3, 4, 0], [5, 0, 0]]), lengths=np.array([2, 1]), start_ix=np.array([0, 1]),
                    end_ix=np.array([1, 2]), image_ids=np.array([7, 8]), splits=np.array(["train", "val"]),
                    max_length=3, path=tmp_path / "a" / "labels.h5")
    moved = dataclasses.replace(labels, path=tmp_path / "b" / "labels.h5")
    assert references_sha256(moved) == references_sha256(labels)
    for change in ({"labels": np.array([[3, 4, 0], [6, 0, 0]])}, {"splits": np.array(["train", "test"])},
                   {"end_ix": np.array([2, 2]), "start_ix": np.array([0, 2])}):
        assert references_sha256(dataclasses.replace(labels, **change)) != references_sha256(labels)


def test_greedy_baseline_is_the_eval_mode_greedy_captions_reward():
    torch.manual_seed(0)
    model = Captioner("topdown", vocab_size=5, fc_feat_size=6, att_feat_size=6, input_encoding_size=8, rnn_size=8,
                      att_hid_size=4, drop_prob_lm=0.5).train()
    fc, att = torch.randn(3, 6), torch.randn(3, 4, 6)
    seq = greedy_captions(model, fc, att, 5)
    assert model.training  # restored
    model.eval()
    assert torch.equal(seq, greedy(model, fc, att, 5).seq)  # no dropout in the baseline's caption
    np.testing.assert_allclose(baseline("greedy", np.zeros((3, 4)), np.array([0.5, 1.0, 2.0])),
                               np.array([[0.5] * 4, [1.0] * 4, [2.0] * 4]))
    with pytest.raises(ValueError):
        baseline("greedy", np.zeros((3, 4)))


def test_loss_gradient_is_minus_advantage_times_grad_logprob():
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    loss = scst_loss(logp, np.array([1.0, 0.2, 0.7]), np.array([0.5, 0.5, 0.7]))
    loss.backward()
    np.testing.assert_allclose(logp.grad.numpy(), -np.array([0.5, -0.3, 0.0]) / 3, atol=1e-7)
    assert loss.item() == pytest.approx(-(0.5 * -1.0 + -0.3 * -2.0) / 3)


def tiny_captioner(core="att2all2", vocab=4, seed=0, drop=0.0):
    torch.manual_seed(seed)
    return Captioner(core, vocab_size=vocab, fc_feat_size=4, att_feat_size=4, input_encoding_size=8, rnn_size=12,
                     att_hid_size=6, drop_prob_lm=drop,
                     core_args={"layers": 2, "heads": 2, "ff_size": 16} if core == "transformer" else None)


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_sample_logprob_is_words_plus_eos_and_ignores_what_follows(core):
    model = tiny_captioner(core).eval()
    fc, att = torch.randn(3, 4), torch.randn(3, 2, 4)
    dec = sample_captions(model, fc, att, n=4, max_len=5, generator=torch.Generator().manual_seed(0))
    assert dec.logprob.requires_grad and dec.seq.shape == (12, 5)
    fc4, att4 = fc.repeat_interleave(4, 0), att.repeat_interleave(4, 0)
    with torch.no_grad():
        forced = sequence_logprob(model, fc4, att4, dec.seq, 5)
        ends = (dec.seq == 0).int().argmax(1)
        dirty = dec.seq.clone()
        for k in range(len(dirty)):  # garbage after the EOS of every caption that has one
            if (dec.seq[k] == 0).any():
                dirty[k, ends[k] + 1:] = torch.randint(1, 5, (5 - ends[k] - 1,))
        forced_dirty = sequence_logprob(model, fc4, att4, dirty, 5)
    torch.testing.assert_close(dec.logprob.detach(), forced, rtol=0, atol=1e-5)
    torch.testing.assert_close(forced_dirty, forced, rtol=0, atol=0)
    adv = np.linspace(-1, 1, 12)
    assert scst_loss(forced_dirty, adv, 0 * adv).item() == pytest.approx(scst_loss(dec.logprob, adv, 0 * adv).item(),
                                                                        abs=1e-5)


def test_samples_embed_each_image_once_with_the_gradients_of_repeated_features():
    """sample_captions embeds an image's features once for its n samples (as self-critical.pytorch
    does); its log-probabilities and their gradients are those of the features repeated n times."""
    model = tiny_captioner("topdown").eval()
    fc, att = torch.randn(3, 4), torch.randn(3, 2, 4)
    rows = []
    hook = model.att_embed.register_forward_hook(lambda mod, inp, out: rows.append(inp[0].shape[0]))
    dec = sample_captions(model, fc, att, n=4, max_len=5, generator=torch.Generator().manual_seed(1))
    hook.remove()
    assert rows == [3]  # 3 images embedded once, not 12 rows
    dec.logprob.sum().backward()
    once = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sequence_logprob(model, fc.repeat_interleave(4, 0), att.repeat_interleave(4, 0), dec.seq, 5).sum().backward()
    for a, b in zip(once, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- toy problem: exact expectation

TOY_REFS = [[[1, 2, 0], [1, 2, 3]], [[3, 4, 0], [4, 3, 0]], [[2, 0, 0], [2, 1, 0]]]


def toy_reward() -> CiderReward:
    rows = [r for refs in TOY_REFS for r in refs]
    counts = [len(r) for r in TOY_REFS]
    labels = Labels(labels=np.array(rows), lengths=None, start_ix=np.cumsum(counts) - counts,
                    end_ix=np.cumsum(counts), image_ids=np.arange(3), splits=np.array(["train"] * 3), max_length=3,
                    path="toy")
    return CiderReward(labels, build_doc_freq(labels, base=5))


def all_captions(vocab=4, max_len=3) -> torch.Tensor:
    """Every caption a decoder of max_len steps can emit: words then EOS, or max_len words."""
    out = []
    for n in range(max_len + 1):
        for words in itertools.product(range(1, vocab + 1), repeat=n):
            out.append(list(words) + [0] * (max_len - n))
    return torch.tensor(out)


@torch.no_grad()
def expected_reward(model, fc, att, reward) -> float:
    """Exact E[CIDEr-D] under the eval-mode policy, by enumerating all 85 captions per image."""
    model.eval()
    caps = all_captions()
    total = 0.0
    for i in range(len(fc)):
        logp = sequence_logprob(model, fc[i:i + 1].expand(len(caps), -1), att[i:i + 1].expand(len(caps), -1, -1),
                                caps, 3)
        p = logp.exp().numpy().astype(np.float64)
        assert abs(p.sum() - 1.0) < 1e-4
        total += float(p @ reward(caps.numpy(), np.full(len(caps), i)))
    return total / len(fc)


@pytest.mark.parametrize("kind", ["greedy", "mean"])
def test_scst_raises_the_exact_expected_cider_d_of_a_toy_captioner(kind):
    reward = toy_reward()
    model = tiny_captioner(seed=1)
    torch.manual_seed(2)
    fc, att = torch.randn(3, 4), torch.randn(3, 2, 4)
    label_ix = np.arange(3)
    before = expected_reward(model, fc, att, reward)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    gen = torch.Generator().manual_seed(0)
    for _ in range(80):  # 40 steps reached half the gap for only about half the sampling seeds; 80 for 5 of 5
        model.train()
        greedy_r = reward(greedy_captions(model, fc, att, 3), label_ix) if kind == "greedy" else None
        dec = sample_captions(model, fc, att, 6, 3, generator=gen)
        r = reward(dec.seq, np.repeat(label_ix, 6)).reshape(3, 6)
        loss = scst_loss(dec.logprob, r, baseline(kind, r, greedy_r))
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = expected_reward(model, fc, att, reward)
    best = np.mean([reward(np.array([refs[1]]), [i])[0] for i, refs in enumerate(TOY_REFS)])
    assert after > before + 0.5 * (best - before), (before, after, best)


# -------------------------------------------------------------------------------- the loop (CLI)

@pytest.fixture(scope="module")
def xe_run(tmp_path_factory):
    """A tiny XE captioner (16 train images, 2 x 2 x 8 features, 1 epoch) to start SCST from."""
    from captioners.config import load_captioner_config
    from captioners.xe import train as xe_train
    from tests.captioners.test_captioners import tiny_caption_set

    root = tmp_path_factory.mktemp("rlloop")
    json_path, feats = tiny_caption_set(root)
    data = [f"data.json={json_path}", f"data.prepro_dir={root / 'prep'}", "data.word_count_threshold=1",
            f"data.features={feats}", "val.batch_size=3"]
    xe = load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", data + [
        f"out_dir={root / 'xe'}", "model.rnn_size=16", "model.input_encoding_size=12", "model.att_hid_size=8",
        "model.drop_prob_lm=0.1", "train.batch_size=4", "train.epochs=1", "train.lr=5e-3"])
    best = xe_train(xe, progress=False)
    return root, data, best


@pytest.fixture(scope="module")
def xe_transformer_run(xe_run):
    """The same tiny set, a tiny Transformer trained one XE epoch on it."""
    from captioners.config import load_captioner_config
    from captioners.xe import train as xe_train

    root, data, _ = xe_run
    xe = load_captioner_config(ROOT / "configs/demo/demo_transformer.yaml", data + [
        f"out_dir={root / 'xe_transformer'}", "model.rnn_size=16", "model.input_encoding_size=12", "model.ff_size=32",
        "model.drop_prob_lm=0.1", "train.batch_size=4", "train.epochs=1", "train.lr=5e-3", "train.lr_warmup_steps=0"])
    return root, data, xe_train(xe, progress=False)


def rl_overrides(xe_run, out: Path, *extra: str) -> list[str]:
    _, data, best = xe_run
    return data + [f"init={best}", f"out_dir={out}", "train.batch_size=4", "train.epochs=2", "train.lr=5e-3",
                   "train.samples_per_image=3", "train.ckpt_every=2", "train.log_every=1", *extra]


def test_scst_run_writes_a_decodable_best_checkpoint(xe_run, tmp_path):
    from rl.scst import train

    _, _, xe_best = xe_run
    # val decoded greedily, as the XE run validated, so that epoch 0 repeats its val score
    cfg = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                           rl_overrides(xe_run, tmp_path / "rl", "val.beam_size=1"))
    best = train(cfg, progress=False)
    history = json.loads((tmp_path / "rl" / "history.json").read_text())
    assert [h["epoch"] for h in history] == [0, 1, 2]
    xe = torch.load(xe_best, weights_only=True)
    assert history[0]["cider_d"] == pytest.approx(xe["val_cider"], abs=1e-9)  # epoch 0 = the XE model
    assert all(h["reward"] is not None and h["baseline"] is not None for h in history[1:])
    ckpt = torch.load(best, weights_only=True)
    assert ckpt["val_cider"] == pytest.approx(max(h["cider_d"] for h in history if h.get("eligible", True)))
    assert ckpt["init_sha256"] and list(ckpt["vocab"]) == list(xe["vocab"])
    acc = EventAccumulator(str(tmp_path / "rl" / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"scst/reward", "scst/baseline", "scst/advantage", "val/cider_d", "val/unique_captions"} <= tags
    assert cfg.train.xe_weight > 0 and "scst/xe" in tags  # the demo's mixed objective: XE on the references
    assert all(h["xe"] > 0 for h in history[1:])
    assert train(cfg, progress=False) == best  # finished: not retrained

    from captioners.predict import main as predict_main
    predict_main(["--checkpoint", str(best), "--split", "test", "--out", str(tmp_path / "preds.json"),
                 "--no-progress", "--beam-size", "2"])
    assert len(json.loads((tmp_path / "preds.json").read_text())) == 4
    meta = json.loads((tmp_path / "preds.meta.json").read_text())
    assert meta["stage"] == "rl"  # eval.reporting.results_table's XE/RL
    # the signature says what trained it, on the checkpoint, the manifest and the predictions' meta
    sig = SCSTSignature.parse(ckpt["scst_signature"])
    assert (sig.eos, sig.baseline, sig.samples, sig.xe_weight, sig.temperature) == (True, "mean", 3, 3.0, 0.5)
    assert sig.df.startswith("train@") and meta["scst_signature"] == ckpt["scst_signature"]
    manifest = json.loads((tmp_path / "rl" / "manifest.json").read_text())
    assert manifest["scst_signature"] == ckpt["scst_signature"]
    assert (Path(cfg.data.prepro_dir) / "cider_df_train_eos.h5").is_file()  # the EOS variant's own cache
    assert "bad_endings" in history[0]


@pytest.mark.parametrize("guard, best_epoch",
                         [("keep_distinct=0.9", 1), ("keep_bleu4=0.95", 2), ("keep_distinct=0", 3)])
def test_collapse_guard_picks_the_best_validation_that_keeps_distinct_captions(xe_run, tmp_path, monkeypatch,
                                                                                guard, best_epoch):
    """Val CIDEr-D rising while distinct captions and BLEU-4 fall (what SCST does on the demo): with a
    guard, best.pt is the last validation that keeps the start's share; without, the last one."""
    from captioners import loop
    from rl import scst as rl_train

    scores, distinct, bleu = iter([0.5, 0.6, 0.7, 0.8]), iter([0.8, 0.75, 0.6, 0.5]), iter([0.3, 0.3, 0.29, 0.28])
    monkeypatch.setattr(loop, "corpus_cider_d", lambda preds, refs: (next(scores), None))
    monkeypatch.setattr(rl_train, "corpus_bleu4", lambda preds, refs: next(bleu))
    real = rl_train.discriminativeness
    monkeypatch.setattr(rl_train, "discriminativeness", lambda caps, seen: {**real(caps, seen),
                                                                            "distinct_captions": next(distinct)})
    cfg = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                           rl_overrides(xe_run, tmp_path / "g", "train.epochs=3", f"train.{guard}",
                                        "train.keep_bleu4=0" if "bleu" not in guard else "train.keep_distinct=0"))
    ckpt = torch.load(rl_train.train(cfg, progress=False), weights_only=True)
    assert (ckpt["epoch"], ckpt["val_cider"]) == (best_epoch, [0.5, 0.6, 0.7, 0.8][best_epoch])
    with pytest.raises(CapawareError, match="keep_distinct"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["train.keep_distinct=1.5"])


def test_init_optimizer_continues_the_xe_runs_adam_state(xe_run, tmp_path):
    """train.init_optimizer: SCST's Adam goes on from the XE best.pt's moments and step counts; by default
    it starts fresh. An XE checkpoint without optimizer state is refused in one line."""
    from rl.scst import train

    _, _, xe_best = xe_run
    xe = torch.load(xe_best, weights_only=True)
    xe_steps = {k: float(v["step"]) for k, v in xe["optimizer"]["state"].items()}
    cfg_path = ROOT / "configs/demo/demo_att2all2_scst.yaml"
    runs = {}
    for carry in (True, False):
        out = tmp_path / str(carry)
        train(load_scst_config(cfg_path, rl_overrides(xe_run, out, "train.epochs=1", "train.lr=2e-3",
                                                      f"train.init_optimizer={str(carry).lower()}")), progress=False)
        runs[carry] = torch.load(out / "last.pt", weights_only=True)
    scst_steps = runs[False]["step"]
    assert scst_steps > 0 and min(xe_steps.values()) > 0
    for k, v in runs[True]["optimizer"]["state"].items():
        assert float(v["step"]) == xe_steps[k] + scst_steps
    assert all(float(v["step"]) == scst_steps for v in runs[False]["optimizer"]["state"].values())
    assert runs[True]["optimizer"]["param_groups"][0]["lr"] == pytest.approx(2e-3)  # this run's lr, not XE's (5e-3)

    bare = tmp_path / "bare.pt"
    torch.save({k: v for k, v in xe.items() if k != "optimizer"}, bare)
    overrides = rl_overrides(xe_run, tmp_path / "bare", "train.init_optimizer=true") + [f"init={bare}"]
    with pytest.raises(CapawareError, match="no optimizer state"):
        train(load_scst_config(cfg_path, overrides), progress=False)


@pytest.mark.parametrize("core", ["topdown", "transformer"])
def test_resume_after_kill_reproduces_the_uninterrupted_run(request, tmp_path, core):
    from rl.scst import StopRequested, train

    xe_run = request.getfixturevalue("xe_transformer_run" if core == "transformer" else "xe_run")
    cfg_path = ROOT / f"configs/demo/demo_{core}_scst.yaml"  # a Top-Down config starts from an Att2all2's best.pt
    train(load_scst_config(cfg_path, rl_overrides(xe_run, tmp_path / "full")), progress=False)

    killed = rl_overrides(xe_run, tmp_path / "killed")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "rl.scst", "--config", str(cfg_path), *killed,
                           "train.stop_after_steps=3"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 3, proc.stderr  # died mid-epoch, like a kill
    state = torch.load(tmp_path / "killed" / "last.pt", weights_only=True)
    assert state["step"] == 2 and not state["done"]
    with pytest.raises(StopRequested):  # killed again, in the second epoch
        train(load_scst_config(cfg_path, killed + ["train.stop_after_steps=6"]), progress=False)
    train(load_scst_config(cfg_path, killed), progress=False)

    from tests.captioners.test_captioners_train import assert_same_checkpoints

    assert_same_checkpoints(tmp_path / "full", tmp_path / "killed")
    h_full = json.loads((tmp_path / "full" / "history.json").read_text())
    h_killed = json.loads((tmp_path / "killed" / "history.json").read_text())
    assert h_full == h_killed
    for tag in ("scst/loss", "val/cider_d"):  # every step logged once: a resume neither loses nor repeats one
        full, killed_steps = tb_steps(tmp_path / "full" / "tb", tag), tb_steps(tmp_path / "killed" / "tb", tag)
        assert full == killed_steps and len(full) > 1, (tag, full, killed_steps)  # tb_steps fails on a repeat

    with pytest.raises(CapawareError, match="another config"):
        train(load_scst_config(cfg_path, killed + ["train.lr=1e-3"]), progress=False)


def test_config_checks_and_paper_settings(xe_run, tmp_path):
    from rl.scst import train

    for path in ("paper/coco_att2all2_scst", "paper/coco_topdown_scst", "demo/demo_att2all2_scst",
                 "demo/demo_topdown_scst"):
        cfg, name = load_scst_config(ROOT / f"configs/{path}.yaml"), Path(path).name
        assert cfg.name == name and cfg.reward.sigma == 6.0
        assert (cfg.train.baseline, cfg.train.sample_dropout) == (("greedy", True) if "coco" in name
                                                                  else ("mean", False))
    coco = load_scst_config(ROOT / "configs/paper/coco_topdown_scst.yaml", ["data.features=cap"])
    assert (coco.train.batch_size, coco.train.lr, coco.train.epochs, coco.train.samples_per_image) == (32, 5e-4, 30, 5)
    assert coco.init == "runs/paper/captioners/cap_topdown/best.pt" and coco.out_dir.endswith("cap_topdown_scst")
    with pytest.raises(CapawareError, match="nonsense"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["train.nonsense=1"])
    with pytest.raises(CapawareError, match="samples_per_image"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                         ["train.baseline=mean", "train.samples_per_image=1"])
    with pytest.raises(CapawareError, match="train.baseline"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["train.baseline=beam"])

    _, data, _ = xe_run
    other = tmp_path / "other.h5"
    import shutil
    shutil.copy(data[3].split("=", 1)[1], other)
    wrong = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                             rl_overrides(xe_run, tmp_path / "w") + [f"data.features={other}"])
    with pytest.raises(CapawareError, match="trained on the features"):  # Img checkpoint, Cap features
        train(wrong, progress=False)

    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = rl_overrides(xe_run, tmp_path / "m") + [f"init={tmp_path / 'nope.pt'}"]
    proc = subprocess.run([sys.executable, "-m", "rl.scst", "--config", "configs/demo/demo_att2all2_scst.yaml", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "XE checkpoint not found" in proc.stderr and "Traceback" not in proc.stderr


def test_val_bleu4_is_pycocoevalcaps_corpus_bleu4():
    from pycocoevalcap.bleu.bleu import Bleu

    from captioners.validation import corpus_bleu4

    refs = {1: ["a red circle on the left side", "one red circle"], 2: ["two blue squares in the top row"]}
    assert corpus_bleu4({1: "a red circle on the left side", 2: "two blue squares in the top row"}, refs) == \
        pytest.approx(1.0)
    preds = {1: "a red circle on the left", 2: "blue squares in the top"}
    expect = Bleu(4).compute_score(refs, {i: [c] for i, c in preds.items()}, verbose=0)[0][3]
    assert corpus_bleu4(preds, refs) == pytest.approx(expect) and 0 < expect < 1
