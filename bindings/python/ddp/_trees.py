"""Trees of arrays and numbers (parameters, gradients, optimizer state) as a
flat list of leaves, and back.

The structure comes from pytree libraries, not from code of our own. optree
opens the built-in containers (dicts, lists, tuples, namedtuples,
OrderedDict, defaultdict, deque): it visits a dict's keys in sorted order, so
two ranks that built the same dict in different insertion orders line up, and
rebuilds each container with its own type and key order. When JAX is loaded,
what JAX's registry opens (optax states, flax structs, equinox modules) is
opened by JAX. A dataclass that neither knows is opened field by field.
"""
import collections.abc
import copy
import dataclasses
import re
import sys

import numpy as np
import optree

from ._staging import is_number


def materialized(tree):
    """The tree, with a one-shot iterable of leaves (a generator such as
    model.parameters(), a map, dict.values()) read into a list first, so
    that it can be flattened, named and rebuilt: the list comes back."""
    if isinstance(tree, (collections.abc.Iterator, collections.abc.ValuesView)):
        return list(tree)
    return tree


def flatten(tree):
    """(leaves, rebuild): the tree's leaves in a fixed order, and a function
    that makes a tree of the same structure from a list of new leaves."""
    leaves, treespec = optree.tree_flatten(tree, namespace="ddp")
    if all(type(leaf) is np.ndarray for leaf in leaves):  # a gradient list: nothing to open
        return leaves, treespec.unflatten
    flat, rebuild_leaves = _open_leaves(leaves)
    return flat, lambda new_leaves: treespec.unflatten(rebuild_leaves(new_leaves))


def _open_leaves(leaves):
    """Opens the nodes optree left as leaves: (flat leaves, rebuild), where
    rebuild turns a list of new flat leaves into the list of rebuilt leaves."""
    flat, parts = [], []  # parts: (how many flat leaves, rebuild or None) per leaf
    for leaf in leaves:
        opened = _open(leaf)
        if opened is None:
            flat.append(leaf)
            parts.append((1, None))
        else:
            flat.extend(opened[0])
            parts.append((len(opened[0]), opened[1]))

    def rebuild(new_leaves):
        remaining = iter(new_leaves)
        rebuilt = []
        for count, rebuild_part in parts:
            taken = [next(remaining) for _ in range(count)]
            rebuilt.append(taken[0] if rebuild_part is None else rebuild_part(taken))
        return rebuilt

    return flat, rebuild


def _open(leaf):
    """(flat leaves, rebuild) of a node optree does not know, or None for a leaf."""
    if is_number(leaf) or isinstance(leaf, (str, bytes)) or hasattr(leaf, "__dlpack__") or \
            hasattr(leaf, "__array_interface__"):
        return None
    if "jax" in sys.modules:
        import jax
        jax_leaves, treedef = jax.tree_util.tree_flatten(leaf)
        if not (len(jax_leaves) == 1 and jax_leaves[0] is leaf):
            flat, rebuild_leaves = _open_leaves(jax_leaves)
            return flat, lambda new_leaves: treedef.unflatten(rebuild_leaves(new_leaves))
    if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
        fields = {field.name: getattr(leaf, field.name) for field in dataclasses.fields(leaf)}
        flat, rebuild_fields = flatten(fields)
        return flat, _dataclass_rebuilder(leaf, rebuild_fields)
    return None


def _dataclass_rebuilder(instance, rebuild_fields):
    """A copy of instance with new field values, set without calling __init__
    or __post_init__ (frozen and slotted dataclasses included)."""
    def rebuild(field_leaves):
        rebuilt = copy.copy(instance)
        for name, value in rebuild_fields(field_leaves).items():
            object.__setattr__(rebuilt, name, value)
        return rebuilt
    return rebuild


def leaf_paths(tree):
    """Each leaf's path in flatten's order, as Python code reaches it from the
    tree: "['layer2']['bias']", "[0]", ".weight" ("" for a tree that is a
    single leaf). Computed only for messages, so flatten stays fast."""
    paths, leaves, _ = optree.tree_flatten_with_path(tree, namespace="ddp")
    result = []
    for path, leaf in zip(paths, leaves):
        prefix = "".join(f"[{entry!r}]" for entry in path)
        opened = _opened_paths(leaf)
        result.extend([prefix] if opened is None else [prefix + inner for inner in opened])
    return result


def _opened_paths(leaf):
    """The paths inside a node that _open opens, or None for a leaf."""
    if is_number(leaf) or isinstance(leaf, (str, bytes)) or hasattr(leaf, "__dlpack__") or \
            hasattr(leaf, "__array_interface__"):
        return None
    if "jax" in sys.modules:
        import jax
        with_paths, _ = jax.tree_util.tree_flatten_with_path(leaf)
        if not (len(with_paths) == 1 and with_paths[0][1] is leaf):
            result = []
            for key_path, inner in with_paths:
                opened = _opened_paths(inner)
                prefix = jax.tree_util.keystr(key_path)
                result.extend([prefix] if opened is None else [prefix + path for path in opened])
            return result
    if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
        fields = {field.name: getattr(leaf, field.name) for field in dataclasses.fields(leaf)}
        return [re.sub(r"^\['(\w+)'\]", r".\1", path) for path in leaf_paths(fields)]
    return None
