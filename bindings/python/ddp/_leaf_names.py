"""Names of a tree's leaves for the timeline: each leaf's path in the tree
("layer1.weight", "opt.mu.0"), passed in ddp_collective_options.names while a
timeline records, so the trace says which parameters a call or bucket carried.
"""
import ctypes
import os

import optree


def timeline_from_environment():
    """DDP_TIMELINE starts a timeline in ddp_init."""
    return bool(os.environ.get("DDP_TIMELINE"))


# Whether a timeline records (set by ddp.timeline): names cost nothing otherwise.
recording = timeline_from_environment()


def of(tree, leaves):
    """A C array of the names of `tree`'s `leaves` for ddp_collective_options.names,
    or None: when no timeline records, and for trees whose leaves were opened
    further than optree opens them (dataclasses, JAX pytrees)."""
    if not recording:
        return None
    try:
        paths, flat, _ = optree.tree_flatten_with_path(tree, namespace="ddp")
    except Exception:  # a tree optree cannot walk goes unnamed, as without a timeline
        return None
    if len(flat) != len(leaves):
        return None
    names = [".".join(str(key) for key in path) or "<root>" for path in paths]
    return (ctypes.c_char_p * len(names))(*(name.encode() for name in names))
