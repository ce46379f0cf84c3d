"""Image ids of a folder of images (``feature_extract.sources.folder_ids``): from the names' trailing digits, from
positions when no name has them, and refused in one line when names mix the two or share a number (issue #58: a
mixed folder had been renumbered 0..n-1 without a word, and the scorer then blamed the split)."""
from pathlib import Path

import numpy as np
import pytest

from capcore.errors import CapawareError
from feature_extract.sources import folder_ids

COCO = [Path("val/COCO_val2014_000000391895.jpg"), Path("val/COCO_val2014_000000522418.jpg")]


def test_coco_names_give_their_ids_and_plain_names_their_positions():
    assert folder_ids(COCO).tolist() == [391895, 522418]
    assert np.array_equal(folder_ids([Path("a/cat.png"), Path("a/dog.jpg"), Path("a/sky.jpg")]), [0, 1, 2])


def test_names_with_and_without_ids_are_refused_naming_one_of_each():
    with pytest.raises(CapawareError) as err:
        folder_ids([*COCO, Path("val/holiday.jpg")])
    said = str(err.value)
    assert "2 image names end in digits" in said and "COCO_val2014_000000391895.jpg" in said and "holiday.jpg" in said
    assert "\n" not in said and err.value.where == "val"


def test_two_names_ending_in_the_same_number_are_refused():
    with pytest.raises(CapawareError, match="img_7.jpg and photo_007.png end in the same number"):
        folder_ids([Path("x/img_7.jpg"), Path("x/photo_007.png"), Path("x/img_8.jpg")])
