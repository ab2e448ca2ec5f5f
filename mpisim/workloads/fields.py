"""The fields every workload kind reads the same way: its block, sizes, counts, dtypes.

A workload kind declares its ``workload:`` block as a :class:`~mpisim.engine.reader.Block`
(:func:`workload_block`) and reads it through that block, so the kind's keys are checked, and
published in ``mpisim schema``, from one declaration. The field kinds shared by several
workloads live here, each a spec (for the block) and a function (for the reading code):

* :data:`SIZES` / :func:`parse_sizes` -- ``[1 KiB, 1 MiB]``, one size, or nccl-tests' range
  ``{min: 8 B, max: 1 GiB, factor: 2}``;
* :func:`count` / :func:`parse_positive_int` -- a whole number at least some minimum (``1K`` reads);
* :data:`DTYPE` / :func:`parse_dtype` -- a numpy dtype name (float32, bf16, float8_e4m3, ...).

Error paths are relative to the workload block (``sizes[1]``, ``sizes.max``); the scenario
prefixes ``workload``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mpisim.engine.reader import Block, Choice, Custom, Spec, Unit
from mpisim.engine.units import format_size, parse_count, parse_size
from mpisim.errors import ConfigError
from mpisim.mpi.dtypes import DTYPES

__all__ = [
    "DTYPE", "SIZES", "check_fields", "check_keys", "count", "parse_dtype", "parse_positive_int", "parse_sizes",
    "parse_with", "read", "workload_block",
]

_MISSING = object()


def workload_block(kind: str, fields: Mapping[str, Spec]) -> Block:
    """The ``workload:`` block of *kind*: ``kind`` itself, then *fields* (the allowed keys, in order)."""
    return Block({"kind": Choice((kind,), f"expected kind {kind!r}, got {{value!r}}"), **fields},
                 expected=f"a mapping of {kind} workload settings", show=repr, suggest=False)


def check_keys(raw: Any, allowed: Block | Sequence[str], kind: str) -> Mapping[str, Any]:
    """Return *raw* without its null values if it is a mapping with only the block's keys.

    A null value means "the default", as everywhere in a scenario (so ``--set
    workload.layers=null`` removes a key). Raises ConfigError naming the first unknown key and
    listing the allowed ones; a ``kind`` key, if present, must equal *kind*.
    """
    block = allowed if isinstance(allowed, Block) else workload_block(kind, {key: _ANY for key in allowed
                                                                                if key != "kind"})
    raw = block.mapping(raw)
    if "kind" in raw:
        block.fields["kind"].read(raw["kind"], "kind")
    return {key: value for key, value in raw.items() if value is not None}


def read(block: Block, raw: Mapping[str, Any], key: str, default: Any = _MISSING) -> Any:
    """Read ``raw[key]`` (or *default* when it is absent) through the block's spec for *key*.

    Without a default, an absent key raises the spec's ``required`` message at *key*.
    """
    spec = block.fields[key]
    if key not in raw:
        if default is _MISSING:
            raise ConfigError(spec.required or "this key is required", key)
        return spec.read(default, key)
    return spec.read(raw[key], key)


def check_fields(raw: Mapping[str, Any], allowed: Sequence[str], required: Sequence[str], path: str) -> None:
    """Check a nested mapping at *path*: only *allowed* keys, and every *required* one present.

    Raises ConfigError at ``path.key`` naming the unknown key (listing the allowed ones) or the
    missing one.
    """
    Block(dict.fromkeys(allowed, _ANY), suggest=False).mapping(raw, path)
    for key in required:
        if key not in raw:
            raise ConfigError("this key is required", f"{path}.{key}")


def parse_with(parse: Any, value: Any, path: str) -> Any:
    """Call ``parse(value)``; a ConfigError (UnitError included) gets *path* prepended."""
    return Unit(parse).read(value, path)


def parse_positive_int(value: Any, path: str, minimum: int = 1) -> int:
    """Return a whole number >= *minimum* (``"1K"`` style counts allowed)."""
    number = parse_with(parse_count, value, path)
    if number < minimum:
        raise ConfigError(f"must be at least {minimum}, got {value!r}", path)
    return number


def count(minimum: int = 1, description: str = "") -> Spec:
    """A count field: a whole number at least *minimum* (:func:`parse_positive_int`)."""
    return Custom(lambda value, path: parse_positive_int(value, path, minimum),
                  {"anyOf": [{"type": "integer", "minimum": minimum}, {"type": "string"}]}, description=description)


def parse_dtype(value: Any, path: str = "dtype") -> np.dtype:
    """Return the numpy dtype named *value* (float32, fp16, bf16, float8_e4m3, int8, ...).

    Raises ConfigError for unknown names, listing the known ones.
    """
    if not isinstance(value, str):
        raise ConfigError(f"expected a dtype name, got {value!r}", path)
    name = value.strip().lower()
    if name not in DTYPES:
        known = ", ".join(sorted({dtype.name for dtype in DTYPES.values()}))
        raise ConfigError(f"unknown dtype {value!r}; known: {known}", path)
    return DTYPES[name]


DTYPE = Custom(lambda value, path: parse_dtype(value, path), {"type": "string", "examples": sorted(DTYPES)},
               description="Element type: a numpy name (float32, bf16, int8, ...).")

_RANGE_KEYS = ("min", "max", "factor")


def parse_sizes(raw: Any, path: str = "sizes", itemsize: int = 1) -> tuple[int, ...]:
    """Return message sizes in bytes from a list, a single size, or ``{min, max, factor}``.

    The range form follows nccl-tests' ``-b/-e/-f``: ``min, min*factor, ...`` up to and including
    ``max``. Every size must be a whole number of *itemsize*-byte elements. Raises ConfigError
    with the path of the offending entry (``sizes[1]``, ``sizes.max``).
    """
    if isinstance(raw, Mapping):
        check_fields(raw, _RANGE_KEYS, ("min", "max"), path)
        low = parse_with(parse_size, raw["min"], f"{path}.min")
        high = parse_with(parse_size, raw["max"], f"{path}.max")
        factor = parse_positive_int(raw.get("factor", 2), f"{path}.factor", minimum=2)
        if high < low:
            raise ConfigError(f"max ({format_size(high)}) is below min ({format_size(low)})", f"{path}.max")
        if low == 0:
            raise ConfigError("min must be above 0 B for a geometric range (list 0 B separately)", f"{path}.min")
        _check_whole(low, itemsize, f"{path}.min")
        sizes, size = [], low
        while size <= high:
            sizes.append(size)
            size *= factor
        return tuple(sizes)
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ConfigError("expected at least one size", path)
    sizes = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]" if isinstance(raw, list) else path
        size = parse_with(parse_size, item, where)
        _check_whole(size, itemsize, where)
        sizes.append(size)
    return tuple(sizes)


def _check_whole(size: int, itemsize: int, path: str) -> None:
    if size % itemsize:
        raise ConfigError(
            f"{format_size(size)} is not a whole number of {itemsize}-byte elements", path)


_SIZE_RULE = Unit(parse_size, "1 MiB").json()
SIZES = Custom(lambda value, path: parse_sizes(value, path), {"anyOf": [
    _SIZE_RULE,
    {"type": "array", "items": _SIZE_RULE, "minItems": 1},
    {"type": "object", "properties": {"min": _SIZE_RULE, "max": _SIZE_RULE, "factor": {"type": ["integer", "string"]}},
     "required": ["min", "max"], "additionalProperties": False},
]}, description="Message sizes: a list [1 KiB, 1 MiB], one size, or a range {min: 8 B, max: 1 GiB, factor: 2}.")

#: A field whose value is read by the workload's own code (described as anything).
_ANY = Custom(lambda value, path: value)
