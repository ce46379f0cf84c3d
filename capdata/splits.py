"""Split names that more than one reader and the format table share (a module of its own, so that the table,
``capdata.formats``, and the readers it calls never import each other)."""

KARPATHY_SPLITS = ("train", "restval", "val", "test")  # Karpathy's json, and COCO's release with a split file
ALL = "all"  # every record: the pseudo-split of a caption file without splits, and the view's "every split"
