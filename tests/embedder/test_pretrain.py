"""The stand-in "Img" backbone's pretraining: attribute targets, per-group accuracy, label-safe augmentation."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from capdata.readers.karpathy import read_karpathy
from capdata.records import CaptionRecords
from capdata.synthetic.shapes_captions import scene_attributes
from embedder.config import load_config
from embedder.pretrain import category_targets, dihedral, group_accuracy, image_tags
from embedder.schedule import lr_factor

ROOT = Path(__file__).resolve().parents[2]


def records(attributes=None, categories=None) -> CaptionRecords:
    n = len(attributes or categories)
    return CaptionRecords(image_paths=[None] * n, splits=np.array(["train"] * n), image_ids=np.arange(n),
                          captions=[[]] * n, categories=categories, attributes=attributes)


def test_scene_attributes_name_what_the_captions_can_say():
    scene = {"background": "grey", "objects": [
        {"shape": "circle", "colour": "red", "size": "small"}, {"shape": "circle", "colour": "red", "size": "large"},
        {"shape": "star", "colour": "blue", "size": "small"}]}
    assert scene_attributes(scene) == {"shape": ["circle", "star"], "colour": ["blue", "red"],
                                       "object": ["blue star", "red circle"], "size": ["large", "small"],
                                       "count": ["3"], "background": ["grey"]}


def test_synthetic_json_carries_attributes_that_the_reader_returns(tmp_path):
    from capdata.synthetic import generate_captions

    path = generate_captions(tmp_path, n_train=4, n_test=2, seed=0, size=32)
    rec = read_karpathy(path)
    raw = json.loads(path.read_text())["images"]
    assert rec.attributes == [im["attributes"] for im in raw]
    for im, attrs in zip(raw, rec.attributes):
        assert attrs["shape"] == im["categories"]  # the same shapes, two views
        assert 1 <= int(attrs["count"][0]) <= 4 and len(attrs["object"]) <= int(attrs["count"][0])


def test_targets_are_multi_hot_tags_and_fall_back_to_categories():
    rec = records([{"shape": ["circle"], "count": ["2"]}, {"shape": ["circle", "star"], "count": ["3"]}])
    targets, names = category_targets(rec)
    assert names == ["count:2", "count:3", "shape:circle", "shape:star"]
    assert targets.tolist() == [[1, 0, 1, 0], [0, 1, 1, 1]]
    held = records([{"shape": ["hexagon"], "count": ["2"]}])  # an attribute training never saw: left out
    assert category_targets(held, names)[0].tolist() == [[1, 0, 0, 0]]
    assert image_tags(records(categories=[["dog"], []])) == [["category:dog"], []]
    with pytest.raises(CapawareError, match="attributes"):
        category_targets(CaptionRecords(image_paths=[None], splits=np.array(["train"]), image_ids=np.arange(1),
                                        captions=[[]]))  # real COCO: neither attributes nor categories


def test_group_accuracy_exact_set_for_multi_label_and_argmax_for_counts():
    names = ["count:1", "count:2", "shape:circle", "shape:star"]
    targets = np.array([[1, 0, 1, 0], [0, 1, 1, 1], [0, 1, 0, 1]], np.float32)
    logits = np.array([[2.0, 1.0, 3, -3],   # count right (argmax), shapes right
                       [0.5, -0.5, 3, -3],  # count wrong, star missed
                       [-4.0, -3.0, 3, 3]])  # count right although both logits < 0, circle wrongly named
    acc = group_accuracy(logits, targets, names)
    assert acc["count"] == pytest.approx(2 / 3) and acc["shape"] == pytest.approx(1 / 3)
    assert acc["all"] == pytest.approx(1 / 3)  # every group right: row 1 only (row 2: count, row 3: shapes)


def test_dihedral_moves_pixels_but_keeps_each_image_content():
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 3, 4, 4)
    seen = set()
    for seed in range(20):
        y = dihedral(x, np.random.default_rng(seed))
        assert y.shape == x.shape
        for i in range(2):  # each output is one of the 8 symmetries of its own input
            options = [torch.rot90(x[i], k, (1, 2)) for k in range(4)]
            options += [torch.flip(o, (2,)) for o in options]
            match = [k for k, o in enumerate(options) if torch.equal(o, y[i])]
            assert match
            seen.add(match[0])
    assert len(seen) == 8


def test_object_crops_are_labelled_with_the_objects_whose_centre_they_hold():
    from embedder.data import ImageBank
    from embedder.pretrain import Views

    objects = [{"shape": "star", "colour": "red", "size": "small", "bbox": [10, 10, 20, 20]},     # centre (20, 20)
               {"shape": "circle", "colour": "blue", "size": "large", "bbox": [90, 90, 30, 30]}]  # centre (105, 105)
    rec = CaptionRecords(image_paths=[None], splits=np.array(["train"]), image_ids=np.arange(1), captions=[[]],
                         attributes=[{"shape": ["circle", "star"], "colour": ["blue", "red"],
                                      "object": ["blue circle", "red star"], "size": ["large", "small"],
                                      "count": ["2"], "background": ["grey"]}],
                         objects=[objects], sizes=np.array([[128.0, 128.0]]))
    _, names = category_targets(rec)
    names = sorted(set(names) | {"count:1"})
    image = torch.arange(3 * 64 * 64, dtype=torch.float32).reshape(1, 3, 64, 64).remainder(251).to(torch.uint8)
    bank = ImageBank(rec, 64, cache=image)  # a 64 px frame: box coordinates are halved
    views = Views(bank, names, crop=32, targets="attributes")
    seen = set()
    for seed in range(12):
        x, y = views.batch(np.array([0]), np.random.default_rng(seed))
        assert x.shape == (1, 3, 32, 32)
        tags = {names[i] for i in np.flatnonzero(y[0].numpy())}
        assert tags in ({"shape:star", "colour:red", "object:red star", "size:small", "count:1", "background:grey"},
                        {"shape:circle", "colour:blue", "object:blue circle", "size:large", "count:1",
                         "background:grey"})  # the two centres are 42 px apart in the frame: one per crop
        seen.add(min(t for t in tags if t.startswith("shape:")))
    assert seen == {"shape:star", "shape:circle"}  # a random object per draw
    with pytest.raises(CapawareError, match="pretrain.crop"):
        Views(bank, names, crop=65, targets="attributes")


def test_cosine_lr_decay_anneals_from_the_lr_to_zero_and_none_keeps_it():
    total = 40
    cosine = [lr_factor("cosine", s, total) for s in range(total + 1)]
    assert cosine[0] == 1.0 and abs(cosine[total // 2] - 0.5) < 1e-12 and abs(cosine[-1]) < 1e-12
    assert all(a > b for a, b in zip(cosine, cosine[1:]))  # strictly decreasing: no restart
    assert {lr_factor("none", s, total) for s in range(total + 1)} == {1.0}


def test_an_unknown_pretrain_lr_decay_is_refused_in_one_line():
    with pytest.raises(CapawareError, match="pretrain.lr_decay"):
        load_config(str(ROOT / "configs/demo/demo_caption.yaml"), ["pretrain.lr_decay=linear"])


def test_identity_crops_carry_one_kind_and_nothing_the_captions_say_beyond_it(tmp_path):
    """ImageNet's kind of label: one class per object-centred crop, the kind of its central object; no
    colour, count, size or background tag anywhere among the classes."""
    from capdata.synthetic.shapes_captions import COLOURS, SHAPES, generate_captions
    from embedder.data import ImageBank
    from embedder.pretrain import Views, kind_names, target_names

    rec = read_karpathy(generate_captions(tmp_path / "set", n_train=24, n_test=2, seed=3, size=64))
    names = target_names(rec, "identity")
    assert names == kind_names(rec) and {n.split(":", 1)[0] for n in names} == {"kind"}
    assert {n.split(":", 1)[1] for n in names} <= {f"{c} {s}" for c in COLOURS for s in SHAPES}
    assert target_names(rec, "identity_shape") == sorted({f"kind:{o['shape']}" for objs in rec.objects for o in objs})
    bank = ImageBank.build(rec, 64, True)
    views = Views(bank, names, crop=24, targets="identity")
    for seed in range(4):
        x, y = views.batch(np.arange(len(rec)), np.random.default_rng(seed))
        assert x.shape == (len(rec), 3, 24, 24)
        assert torch.equal(y.sum(1), torch.ones(len(rec)))  # exactly one label per image
        present = [{f"kind:{o['colour']} {o['shape']}" for o in objs} for objs in rec.objects]
        assert all(names[int(k)] in p for k, p in zip(y.argmax(1), present))  # a kind the image really holds


def test_identity_labels_the_object_nearest_the_crop_centre():
    from embedder.data import ImageBank
    from embedder.pretrain import Views

    objects = [{"shape": "star", "colour": "red", "size": "small", "bbox": [10, 10, 20, 20]},     # centre (20, 20)
               {"shape": "circle", "colour": "blue", "size": "large", "bbox": [90, 90, 30, 30]}]  # centre (105, 105)
    rec = CaptionRecords(image_paths=[None], splits=np.array(["train"]), image_ids=np.arange(1), captions=[[]],
                         attributes=None, objects=[objects], sizes=np.array([[128.0, 128.0]]))
    image = torch.zeros(1, 3, 64, 64, dtype=torch.uint8)
    image[:, :, 5:15, 5:15] = 200  # the star's region in the 64 px frame: a crop holding it is not all zeros
    views = Views(ImageBank(rec, 64, cache=image), ["kind:blue circle", "kind:red star"], crop=32, targets="identity")
    for seed in range(12):
        x, y = views.batch(np.array([0]), np.random.default_rng(seed))
        holds_star = bool((x[0] != x[0, :, -1:, -1:]).any())  # the crops hold one centre each (42 px apart)
        assert y[0].tolist() == ([0.0, 1.0] if holds_star else [1.0, 0.0])
    with pytest.raises(CapawareError, match="pretrain.crop"):
        Views(ImageBank(rec, 64, cache=image), ["kind:blue circle", "kind:red star"], crop=None,
              targets="identity_shape")
    unseen = Views(ImageBank(rec, 64, cache=image), ["kind:blue circle"], crop=32, targets="identity")
    with pytest.raises(CapawareError, match="'kind:red star' is not among the 1 kinds the pretraining set shows"):
        for seed in range(12):  # some crop lands on the star
            unseen.batch(np.array([0]), np.random.default_rng(seed))


def test_a_finished_backbone_trained_otherwise_is_refused_not_reused(tmp_path):
    from capcore.checkpoint import save_checkpoint
    from embedder.pretrain import pretrain

    cfg = load_config(str(ROOT / "configs/demo/demo_caption.yaml"), ["pretrain.targets=attributes"])
    save_checkpoint({"model": {}, "fingerprint": "trained with identity targets"}, tmp_path / "model.pt")
    with pytest.raises(CapawareError, match="other pretrain settings"):
        pretrain(cfg, tmp_path, views=None, progress=False)


def test_an_unknown_pretrain_target_is_refused_in_one_line():
    with pytest.raises(CapawareError, match="pretrain.targets"):
        load_config(str(ROOT / "configs/demo/demo_caption.yaml"), ["pretrain.targets=captions"])


class NaNViews:
    """Two kinds, eight crops whose pixels are NaN: the loss is NaN from the first step."""
    names = ["kind:blue circle", "kind:red star"]

    def __len__(self):
        return 8

    def batch(self, index, rng, device=None):
        y = torch.nn.functional.one_hot(torch.as_tensor(index % 2), 2).float()
        return torch.full((len(index), 3, 32, 32), float("nan")), y


def test_a_diverged_pretraining_stops_in_one_line_and_saves_nothing(tmp_path):
    """The tiny pipeline's pretraining once came out NaN (issue #36): it must stop, name the run, and leave no
    NaN weights behind for stage one to start from."""
    from embedder.pretrain import pretrain

    cfg = load_config(str(ROOT / "configs/demo/demo_caption.yaml"),
                      ["pretrain.batch_size=4", "pretrain.epochs=5", "pretrain.ckpt_every=4", "device=cpu"])
    with pytest.raises(CapawareError, match=r"the loss became nan at step 4; nothing of this step was saved"
                                            r".*pretrain.lr") as err:
        pretrain(cfg, tmp_path / "class_pretrained", views=NaNViews(), progress=False)
    assert str(tmp_path / "class_pretrained") in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "class_pretrained").glob("*.pt"))


def test_a_nan_weight_behind_a_finite_loss_is_named():
    from capcore.finite import check_finite_weights

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    check_finite_weights(model, "run", "fix it")  # finite: silent
    with torch.no_grad():
        model[1].weight[0, 1] = float("nan")
    with pytest.raises(CapawareError,
                       match=r"run: weight 1.weight holds NaN or inf; nothing was saved \(fix: fix it\)"):
        check_finite_weights(model, "run", "fix it")


class CountedViews:
    """``Views`` that count the batches drawn: one per optimiser step."""

    def __init__(self, views):
        self.views, self.steps = views, 0

    def __getattr__(self, name):
        return getattr(self.views, name)

    def __len__(self):
        return len(self.views)

    def batch(self, *args, **kwargs):
        self.steps += 1
        return self.views.batch(*args, **kwargs)


@pytest.fixture(scope="module")
def tiny_views(tmp_path_factory):
    """24 synthetic caption scenes at 64 px, as 24 px identity crops: 3 steps an epoch at batch 8."""
    from capdata.synthetic.shapes_captions import generate_captions
    from embedder.data import ImageBank, split_records
    from embedder.pretrain import Views, target_names

    rec = split_records(read_karpathy(generate_captions(tmp_path_factory.mktemp("set"), n_train=24, n_test=2,
                                                        seed=3, size=64)), ("train", "restval"))
    return Views(ImageBank.build(rec, 64, True), target_names(rec, "identity"), crop=24, targets="identity")


def test_a_killed_pretraining_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path, tiny_views, one_thread):
    """Class pretraining on the shared harness (issue #38): ``pretrain.stop_after_steps`` dies after step 3
    like a kill (step 3 is lost: the last checkpoint is step 2); the rerun takes steps 3-6 from last.pt and
    ends with exactly the uninterrupted run's weights, its TensorBoard showing each logged step once."""
    from capcore.errors import StopRequested
    from embedder.pretrain import pretrain
    from tests.tensorboard_log import tb_steps

    args = ["pretrain.batch_size=8", "pretrain.epochs=2", "pretrain.ckpt_every=2", "pretrain.lr_decay=cosine",
            "pretrain.augment=true", "pretrain.precision=float32", "pretrain.lr=0.01", "device=cpu"]
    cfg = load_config(str(ROOT / "configs/demo/demo_caption.yaml"), args)
    views = CountedViews(tiny_views)
    full = pretrain(cfg, tmp_path / "full", views, progress=False)
    assert views.steps == 6
    killed = load_config(str(ROOT / "configs/demo/demo_caption.yaml"), args + ["pretrain.stop_after_steps=3"])
    views = CountedViews(tiny_views)
    with pytest.raises(StopRequested):
        pretrain(killed, tmp_path / "killed", views, progress=False)
    assert views.steps == 3 and not (tmp_path / "killed" / "model.pt").exists()
    assert torch.load(tmp_path / "killed" / "last.pt", weights_only=True)["step"] == 2  # step 3 died with the run
    views = CountedViews(tiny_views)
    resumed = pretrain(cfg, tmp_path / "killed", views, progress=False)  # the rerun, without the kill
    assert views.steps == 4  # steps 3 to 6: resumed from last.pt, not started over
    a, b = torch.load(full, weights_only=True), torch.load(resumed, weights_only=True)
    assert a["step"] == b["step"] == 6 and a["fingerprint"] == b["fingerprint"]
    assert a["model"].keys() == b["model"].keys()
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert not (tmp_path / "killed" / "last.pt").exists()
    for run in ("full", "killed"):
        assert tb_steps(tmp_path / run / "tb", "pretrain/cross_entropy") == [2, 4, 6], run
