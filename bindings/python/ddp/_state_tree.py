"""Flattens nested optimizer state (dicts, lists, tuples of arrays and numbers)
into the leaf arrays and scalars that ddp_sync_optimizer_state takes, and
rebuilds it with root's numbers.

Dict entries are visited in sorted key order, so two ranks that built the same
state in different insertion orders still line up. Strings, None and bytes
are configuration, not state: they are kept as they are and not compared.
"""
import copy
import numbers

import numpy as np

PASSED_THROUGH = (str, bytes, type(None))


def _sorted_keys(mapping):
    return sorted(mapping, key=lambda key: (type(key).__name__, str(key)))


def is_array(value):
    return isinstance(value, np.ndarray) or hasattr(value, "__dlpack__") or \
        hasattr(value, "__cuda_array_interface__")


def flatten(state, leaves, scalars, path="state"):
    """Appends state's arrays to leaves and its numbers to scalars, as (path, value)."""
    if isinstance(state, dict):
        for key in _sorted_keys(state):
            flatten(state[key], leaves, scalars, f"{path}[{key!r}]")
    elif isinstance(state, (list, tuple)):
        for index, item in enumerate(state):
            flatten(item, leaves, scalars, f"{path}[{index}]")
    elif is_array(state):
        leaves.append((path, state))
    elif isinstance(state, (numbers.Number, np.number)) and not isinstance(state, complex):
        scalars.append((path, state))
    elif not isinstance(state, PASSED_THROUGH):
        raise TypeError(f"{path}: cannot synchronize a {type(state).__name__}; optimizer state "
                        "holds arrays, numbers, and dicts, lists or tuples of them")


def rebuild(state, values):
    """State with each number replaced, in flatten's order, by the next of values
    (converted back to the number's own type); arrays are kept as objects."""
    if isinstance(state, dict):
        rebuilt = copy.copy(state)  # same type (OrderedDict, defaultdict) and key order
        for key in _sorted_keys(state):
            rebuilt[key] = rebuild(state[key], values)
        return rebuilt
    if isinstance(state, (list, tuple)):
        items = [rebuild(item, values) for item in state]
        return type(state)(*items) if hasattr(state, "_fields") else type(state)(items)
    if is_array(state) or isinstance(state, PASSED_THROUGH):
        return state
    return type(state)(next(values))
