"""joint/tfidf_text.py (issue #67): θ(t) = Wᵀt/‖Wᵀt‖ by hand, sparse and dense alike, a word's concept as θ of its
one-hot bag, a modified query by hand, and an unknown word refused in one line naming the nearest stems."""
import numpy as np
import pytest
import torch
from nltk.stem.snowball import SnowballStemmer
from scipy.sparse import csr_matrix

from capcore.errors import CapawareError
from joint.tfidf_text import TfidfTextEncoder, modified_query, scipy_to_torch, stem_ids

VOCAB = ["blue", "circl", "red", "small", "squar"]


def test_theta_is_the_normalised_projection_of_the_bag_sparse_or_dense():
    torch.manual_seed(0)
    tower = TfidfTextEncoder(len(VOCAB), 3)
    bags = np.array([[0.0, 0.6, 0.8, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    want = bags @ tower.weight.detach().numpy()
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    dense = tower(torch.tensor(bags, dtype=torch.float32))
    sparse = tower(scipy_to_torch(csr_matrix(bags)))
    assert np.allclose(dense.detach().numpy(), want, atol=1e-6) and torch.allclose(dense, sparse, atol=1e-6)
    assert torch.allclose(tower.concept([0])[0], dense[1], atol=1e-6)  # a one-hot bag is its concept
    sparse.sum().backward()
    assert tower.weight.grad[[1, 2]].abs().sum() > 0 and tower.weight.grad[[3, 4]].abs().sum() == 0  # bag rows only


def test_a_modified_query_adds_and_removes_concepts_and_an_unknown_word_names_its_neighbours():
    stem = SnowballStemmer("english").stem
    ids = stem_ids(["Circles", "red"], VOCAB, stem)
    assert ids == [1, 2]
    torch.manual_seed(1)
    tower = TfidfTextEncoder(len(VOCAB), 4)
    image = torch.tensor([3.0, 0.0, 4.0, 0.0])
    got = modified_query(image, tower, add=[2], remove=[0])
    w = torch.nn.functional.normalize(tower.weight.detach(), dim=1)
    want = image / 5 + w[2] - w[0]
    assert torch.allclose(got, want / want.norm(), atol=1e-6)
    with pytest.raises(CapawareError, match=r"circel: not in the caption vocabulary \(stem 'circel'\).*nearest: circl"):
        stem_ids(["circel"], VOCAB, stem)
