"""Gordo & Larlus's text modifiers on a tiny trained model (issue #67): scenes of coloured shapes, captioned; an
image side (a linear map of noisy scene features) and the tf-idf tower trained with the G17 (V+T) row's own loss
(embedder.losses.method_loss on Eq. 1-3, relevance the 10 proxy-nearest); then adding "red circle" to a query
without one moves the scenes that hold a red circle up the ranking (their mean rank falls), and removing it from a
query with one moves them down."""
import numpy as np
import torch
from nltk.stem.snowball import SnowballStemmer

from embedder.config import COMPANION_ROWS, TextLossConfig
from embedder.labels.tfidf import TfidfSpace
from embedder.losses.method_loss import MethodLoss
from embedder.proxy_ranking import knn_relevant
from joint.tfidf_text import modified_query, stem_ids

COLOURS, SHAPES = ("red", "blue", "green"), ("circle", "square", "star")


def scenes(n: int, rng) -> tuple[np.ndarray, list[list[str]]]:
    """Multi-hot over the nine coloured shapes (one or two per scene) and each scene's five captions."""
    hot, captions = np.zeros((n, 9)), []
    for i in range(n):
        picks = rng.choice(9, size=rng.integers(1, 3), replace=False)
        hot[i, picks] = 1
        words = [f"a {COLOURS[p // 3]} {SHAPES[p % 3]}" for p in picks]
        captions.append([" and ".join(rng.permutation(words)) for _ in range(5)])
    return hot, captions


def mean_rank(scores: torch.Tensor, targets: np.ndarray) -> float:
    order = torch.argsort(scores, descending=True).numpy()
    position = np.empty(len(order), int)
    position[order] = np.arange(len(order))
    return float(position[targets].mean())


def test_adding_and_removing_red_circle_moves_the_red_circle_scenes():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    hot, captions = scenes(240, rng)
    space = TfidfSpace(captions)
    feats = torch.tensor(hot @ rng.normal(size=(9, 32)) + rng.normal(scale=0.3, size=(240, 32)), dtype=torch.float32)
    image_side = torch.nn.Linear(32, 16)
    spec = COMPANION_ROWS["G17 (V+T)"]
    row = type("Row", (), {"name": "G17 (V+T)", "loss": spec["loss"], "mining": spec["mining"], "margin": 0.2,
                           "loss_args": {}, "text": TextLossConfig(**spec["text"], margin=0.2)})()
    loss = MethodLoss(row, None, 0, space.vectors, 16)
    near = knn_relevant(space.vectors, 10)
    opt = torch.optim.Adam([*image_side.parameters(), *loss.parameters()], lr=1e-2)
    for _ in range(300):
        items = torch.as_tensor(rng.choice(240, 60, replace=False))
        anchors = torch.arange(8)
        positive = torch.as_tensor((items.numpy()[None, None, :] == near[items[:8].numpy()][:, :, None]).any(1))
        value = loss(image_side(feats[items]), anchors, torch.zeros(8, 60), positive, items)
        opt.zero_grad()
        value.backward()
        opt.step()
    tower = loss.text.tower
    red_circle = stem_ids(["red", "circle"], space.vocab, SnowballStemmer("english").stem)
    with torch.no_grad():
        phi = torch.nn.functional.normalize(image_side(feats), dim=1)
        has = np.flatnonzero(hot[:, 0] == 1)  # red circles
        without, with_one = np.flatnonzero(hot[:, 0] == 0)[0], has[0]
        for query, change, direction in ((without, {"add": red_circle}, -1), (with_one, {"remove": red_circle}, 1)):
            targets = has[has != query]
            before = mean_rank(phi @ phi[query], targets)
            after = mean_rank(phi @ modified_query(phi[query], tower, **change), targets)
            assert direction * (after - before) > 10, (change, before, after)  # ranks of 240 move by more than 10
