"""The self-retrieval study's arms, one table (issue #66; Liu et al. 2018, Tables 3 and 4).

Every arm is the demo's SCST recipe (``configs/demo/demo_<core>_scst.yaml``) from the same XE run, with the
``retrieval`` overrides below and nothing else: an arm is one entry here, and the pilot, the study and their tests
read this table. ``{run}`` is the study's run folder. The window of the partially labeled arm is declared, not
tuned: Liu et al. draw from ranks [100, 1000) of COCO's 123K unlabeled images (0.08-0.8% of the pool), which in
the study's pool of 2,000 would be ranks [2, 16); the embedded captions are templated (about one train caption in six
is shared by several images), so ranks that near the top hold images as true of the caption as the reference's own,
and the window starts at 10 (0.5%) and ends at 100 (5%) instead.
"""
from __future__ import annotations

JOINT = "retrieval.model={run}/joint/img/best.pt"
POOL = ["retrieval.unlabeled={run}/features/unlabeled_img.h5", "retrieval.unlabeled_ratio=1"]
WINDOW = "retrieval.window=[10,100]"

ARMS: dict[str, list[str]] = {
    "baseline": [],  # alpha = 0: CIDEr-D alone (the paper's Table 3, alpha 0)
    "sr_fl": ["retrieval.weight=1", JOINT],  # the self-retrieval reward, labeled images only (VSE++, alpha 1)
    "sr_pl": ["retrieval.weight=1", JOINT, *POOL, WINDOW],  # + unlabeled images 1:1 from the rank window
    "sr_pl_uniform": ["retrieval.weight=1", JOINT, *POOL, "retrieval.window=[0,0]"],  # hard negatives off
    "sr_a4": ["retrieval.weight=4", JOINT],  # alpha 4
    "sr_vse0": ["retrieval.weight=1", JOINT, "retrieval.loss=vse0"],  # every negative's hinge, summed
}

LABELS = {"baseline": "SCST (α = 0)", "sr_fl": "SR-FL (α = 1)", "sr_pl": "SR-PL (α = 1, 1:1 unlabeled, window)",
          "sr_pl_uniform": "SR-PL, hard negatives off", "sr_a4": "SR-FL, α = 4", "sr_vse0": "SR-FL, VSE0"}

# The study's world (studies/self_retrieval/world.py): the demo's 1,200 train images (the generator draws each image
# from its own seed, in blocks, so they are the demo's own), 1,000 val and 1,000 test images (R@K in one 1K fold, as
# the paper's COCO 1K test), and an unlabeled pool of 2,000 images drawn from the same world.
WORLD = {"n_train": 1200, "n_val": 1000, "n_test": 1000, "n_unlabeled": 2000, "seed": 0, "size": 128}


def overrides(arm: str, run) -> list[str]:
    """The arm's config overrides for the run folder ``run``; an unknown arm is one line naming the arms."""
    if arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r}: one of {', '.join(ARMS)}")
    return [o.format(run=run) for o in ARMS[arm]]
