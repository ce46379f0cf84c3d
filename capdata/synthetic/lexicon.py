"""The words of shapes-captions: per shape, colour, size, background and count, the words a caption may
use for it. The caption writer (``shapes_captions.py``) picks from these tables and the stand-in word
vectors (``word_vectors.py``) give each of these meanings its own direction, so both import them from
here and neither imports the other's module for them (the writer imports ``write_word_vectors``; the
vectors import nothing from the writer). The keys are the scene's values in ``shapes_captions.py``
(``SHAPES``, ``COLOURS``, ``SIZES``, ``BACKGROUNDS``, 1-4 objects).
"""
from __future__ import annotations

SHAPE_WORDS = {
    "circle": (("circle", "circles"), ("disc", "discs")),
    "square": (("square", "squares"), ("box", "boxes")),
    "triangle": (("triangle", "triangles"),),
    "star": (("star", "stars"),),
    "cross": (("cross", "crosses"), ("plus sign", "plus signs")),
    "hexagon": (("hexagon", "hexagons"),),
}
"""(singular, plural) synonyms per shape."""
COLOUR_WORDS = {"red": ("red",), "green": ("green",), "blue": ("blue",), "yellow": ("yellow",),
                "purple": ("purple", "violet"), "orange": ("orange",)}
SIZE_WORDS = {"small": ("small", "little", "tiny"), "large": ("large", "big")}
BACKGROUND_WORDS = {"white": ("white",), "black": ("black", "dark"), "grey": ("grey", "gray"),
                    "beige": ("beige", "cream")}
COUNT_WORDS = {1: ("a", "one", "a single"), 2: ("two", "a pair of"), 3: ("three",), 4: ("four",)}
GENERIC_NOUNS = (("shape", "shapes"), ("object", "objects"))
"""(singular, plural) nouns for any shape."""
