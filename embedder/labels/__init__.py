"""Label spaces: D(y_a, y_i) for poses, layouts and caption sets, and the neighbour graph file."""
