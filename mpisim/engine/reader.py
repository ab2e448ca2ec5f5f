"""The path-aware reader of user input: each kind of value read once, and described once.

A scenario file is a tree of mappings, lists and scalars. Every field of it is read by one
:class:`Spec`, and a spec does two things from the same declaration:

* ``spec.read(value, path)`` returns the value in SI (or the mapping of read fields) or raises
  :class:`~mpisim.errors.ConfigError` at ``path``, the dotted place of the field in the file
  (``topology.inter.bandwidth``, ``expect[0].rel``), with what was expected;
* ``spec.json()`` returns the same rule as JSON Schema (draft 2020-12), which
  ``mpisim schema`` publishes so that editors validate and complete scenario files.

The kinds of value, and what each accepts::

    Block({key: spec})   a mapping with only these keys (did-you-mean for a typo), required ones
    Choice(names)        one of a few names
    Unit(parse_size)     a quantity with units: size, time, rate, per-byte cost, count, FLOPs
    Whole(), Flag(), Text()  a plain whole number, true or false, a string
    ListOf(spec)         a list whose items are each read by *spec*
    MapOf(names, spec)   a mapping of known names (protocols, number formats) to values
    Either(a, b)         any one of several shapes (a name or a mapping, ...)
    Custom(fn, json)     a rule too particular for the kinds above, with its JSON Schema

Null (``key: ~``, ``--set key=null``) means "the default" everywhere, so a block skips null
fields. Error texts are part of what users see and the tests pin them: each spec takes the
wording its block has always used (``expected``, ``message``), and the defaults are the common
forms (``expected one of a, b, got 'c'``; ``unknown key 'x' (did you mean 'y'?); allowed keys: ...``).

The reader sits in ``engine`` beside :mod:`mpisim.engine.units` because every layer that
declares user input (network fabrics, workload kinds, the scenario) reads through it, and a
layer may only import downward.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mpisim.errors import ConfigError

__all__ = [
    "Block", "Choice", "Custom", "Either", "Flag", "ListOf", "MapOf", "Spec", "Text", "Unit", "Whole",
    "check_keys", "join", "located", "short",
]


def join(path: str, key: object) -> str:
    """The path of *key* inside *path*: ``join("mpi", "eager_limit") == "mpi.eager_limit"``; ``[i]`` indexes."""
    key = str(key)
    if not path:
        return key
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}"


def short(value: Any) -> str:
    """``repr(value)``, cut to about 60 characters so one line stays one line."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}...{text[-7:]}"


def located(err: ConfigError, prefix: str) -> ConfigError:
    """Return *err* with *prefix* prepended to its path, keeping its class (a UnitError stays one)."""
    moved = err.at(prefix)
    return type(err)(moved.message, moved.path, moved.file)


def check_keys(raw: Mapping[Any, Any], allowed: Iterable[str], path: str = "", *, suggest: bool = True) -> None:
    """Raise ConfigError for the first key of *raw* not in *allowed*, listing the allowed keys.

    With *suggest*, a close spelling is offered: ``unknown key 'eager_limt' (did you mean
    'eager_limit'?); allowed keys: ...``.
    """
    allowed = list(allowed)
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1) if suggest else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key {key!r}{hint}; allowed keys: {', '.join(allowed)}", join(path, key))


class Spec(ABC):
    """One kind of value. Subclasses implement :meth:`read` and :meth:`schema`.

    *required* (a message, usually ``"this key is required"``) makes the field mandatory in the
    block that holds it; *description* documents the field in the published JSON Schema.
    """

    def __init__(self, *, required: str | None = None, description: str = "") -> None:
        self.required = required
        self.description = description

    @abstractmethod
    def read(self, value: Any, path: str = "") -> Any:
        """The value read from *value* at *path*; raises ConfigError naming *path* for bad input."""

    @abstractmethod
    def schema(self) -> dict[str, Any]:
        """This rule as JSON Schema, without its description (:meth:`json` adds it)."""

    def json(self) -> dict[str, Any]:
        """This rule as JSON Schema, with its description."""
        out = self.schema()
        if self.description:
            out = {"description": self.description, **out}
        return out


class Unit(Spec):
    """A quantity read by one of :mod:`mpisim.engine.units`' parsers (``parse_size``, ``parse_time``, ...).

    A parser's error (``'10 Gbsp' is not a bandwidth ...``) is kept and placed at the field.
    In the JSON Schema a quantity is a string with units, or a number (zero, a count, or an SI
    value in a resolved scenario: ``units: SI``).
    """

    def __init__(self, parse: Callable[[Any], Any], example: str = "", *, integer: bool = False,
                 required: str | None = None, description: str = "") -> None:
        super().__init__(required=required, description=description)
        self.parse, self.example, self.integer = parse, example, integer

    def read(self, value: Any, path: str = "") -> Any:
        try:
            return self.parse(value)
        except ConfigError as err:
            raise located(err, path) from None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": ["string", "integer" if self.integer else "number"]}
        if self.example:
            out["examples"] = [self.example]
        return out


class Whole(Unit):
    """A plain whole number (``16`` or ``"16"``), at least *minimum* (message ``must be at least ...``)."""

    def __init__(self, parse: Callable[[Any], int], minimum: int | None = None, *, below: str = "",
                 required: str | None = None, description: str = "") -> None:
        super().__init__(parse, integer=True, required=required, description=description)
        self.minimum, self.below = minimum, below

    def read(self, value: Any, path: str = "") -> int:
        number = super().read(value, path)
        if self.minimum is not None and number < self.minimum:
            message = self.below or "must be at least {minimum}, got {value!r}"
            raise ConfigError(message.format(minimum=self.minimum, value=value, number=number), path)
        return number

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^\s*[0-9]+\s*$"}]}
        if self.minimum is not None:
            out["anyOf"][0]["minimum"] = self.minimum
        return out


class Flag(Spec):
    """``true`` or ``false`` (YAML booleans only: ``"yes"`` is a string)."""

    def __init__(self, message: str = "expected true or false, got {value!r}", **kw: Any) -> None:
        super().__init__(**kw)
        self.message = message

    def read(self, value: Any, path: str = "") -> bool:
        if not isinstance(value, bool):
            raise ConfigError(self.message.format(value=value, short=short(value)), path)
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


class Text(Spec):
    """A string; *nonempty* refuses one of only spaces."""

    def __init__(self, message: str = "expected a string, got {value!r}", *, nonempty: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.message, self.nonempty = message, nonempty

    def read(self, value: Any, path: str = "") -> str:
        if not isinstance(value, str) or (self.nonempty and not value.strip()):
            raise ConfigError(self.message.format(value=value, short=short(value)), path)
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", **({"minLength": 1, "pattern": r"\S"} if self.nonempty else {})}


class Choice(Spec):
    """One of *choices* (names; a callable gives them late, for registries filled at import).

    The message may use ``{choices}`` (comma-separated), ``{value!r}``, ``{short}`` and
    ``{hint}`` (``did you mean 'ring'? `` for a close spelling, else nothing).
    """

    def __init__(self, choices: Iterable[str] | Callable[[], Iterable[str]],
                 message: str = "expected one of {choices}, got {short}", *, fold_case: bool = False,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self._choices, self.message, self.fold_case = choices, message, fold_case

    @property
    def choices(self) -> list[str]:
        return list(self._choices() if callable(self._choices) else self._choices)

    def read(self, value: Any, path: str = "") -> str:
        choices = self.choices
        name = value.lower() if self.fold_case and isinstance(value, str) else value
        if not isinstance(value, str) or name not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(self.message.format(choices=", ".join(choices), value=value, short=short(value),
                                                  hint=hint), path)
        return name

    def schema(self) -> dict[str, Any]:
        if self.fold_case:
            return {"type": "string", "examples": self.choices}
        return {"enum": self.choices}


class ListOf(Spec):
    """A list, each item read by *item* at ``path[i]``; *empty* is the message for ``[]`` (None allows it)."""

    def __init__(self, item: Spec, message: str = "expected a list, got {short}", *,
                 empty: str | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.item, self.message, self.empty = item, message, empty

    def read(self, value: Any, path: str = "") -> list[Any]:
        if not isinstance(value, list):
            raise ConfigError(self.message.format(value=value, short=short(value)), path)
        if not value and self.empty is not None:
            raise ConfigError(self.empty, path)
        return [self.item.read(item, join(path, f"[{i}]")) for i, item in enumerate(value)]

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.item.json(), **({"minItems": 1} if self.empty is not None else {})}


class MapOf(Spec):
    """A mapping of known names to values (``{LL: 6.6 us, Simple: 8.4 us}``), returned as sorted (name, value) pairs.

    *unknown* words the error for a name not in *names*: ``unknown {what} 'x'; known: ...``.
    """

    def __init__(self, names: Sequence[str], value: Spec, *, what: str, example: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.names, self.value, self.what, self.example = tuple(names), value, what, example

    def read(self, value: Any, path: str = "") -> tuple[tuple[str, Any], ...]:
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected a mapping such as {self.example}, got {value!r}", path)
        out = []
        for name, item in value.items():
            if name not in self.names:
                raise ConfigError(f"unknown {self.what} {name!r}; known: {', '.join(self.names)}", join(path, name))
            out.append((name, self.value.read(item, join(path, name))))
        return tuple(sorted(out))

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "propertyNames": {"enum": list(self.names)}, "additionalProperties": self.value.json()}


class Either(Spec):
    """One of several shapes. Reading is the holder's job (it knows which shape it has): this
    spec reads with the first alternative whose JSON type matches, and describes them all."""

    def __init__(self, *alternatives: Spec, **kw: Any) -> None:
        super().__init__(**kw)
        self.alternatives = alternatives

    def read(self, value: Any, path: str = "") -> Any:
        for spec in self.alternatives:
            if _json_type_matches(spec, value):
                return spec.read(value, path)
        return self.alternatives[-1].read(value, path)

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [spec.json() for spec in self.alternatives]}


class Custom(Spec):
    """A rule too particular for the kinds above: *read(value, path)* and its JSON Schema *rule*
    (or a function returning it, for rules made from registries filled at import time)."""

    def __init__(self, read: Callable[[Any, str], Any],
                 rule: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self._read, self.rule = read, rule

    def read(self, value: Any, path: str = "") -> Any:
        return self._read(value, path)

    def schema(self) -> dict[str, Any]:
        return dict((self.rule() if callable(self.rule) else self.rule) or {})


class Block(Spec):
    """A mapping with only the declared *fields* (each a Spec), read field by field in declaration order.

    ``read`` returns ``{key: read value}`` for the keys given and not null; a field whose spec
    has ``required`` set must be given. *expected* words the error for a value that is not a
    mapping (``expected {expected}, got {value}``, the value shown by *show*). *suggest* offers a
    close key for a typo. *extra_keys* are allowed and returned unread (a workload's ``kind``).
    *then* adds JSON Schema conditions (``if``/``then``) that the reading code checks itself.
    """

    def __init__(self, fields: Mapping[str, Spec], *, expected: str = "a mapping", show: Callable[[Any], str] = short,
                 suggest: bool = True, extra_keys: Sequence[str] = (), then: Sequence[Mapping[str, Any]] = (),
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.fields, self.expected, self.show = dict(fields), expected, show
        self.suggest, self.extra_keys, self.then = suggest, tuple(extra_keys), list(then)

    @property
    def keys(self) -> list[str]:
        return [*self.fields, *(key for key in self.extra_keys if key not in self.fields)]

    def mapping(self, value: Any, path: str = "") -> Mapping[str, Any]:
        """*value* itself if it is a mapping with only allowed keys; otherwise the error."""
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected {self.expected}, got {self.show(value)}", path)
        check_keys(value, self.keys, path, suggest=self.suggest)
        return value

    def read(self, value: Any, path: str = "") -> dict[str, Any]:
        raw = self.mapping(value, path)
        out: dict[str, Any] = {}
        for key, spec in self.fields.items():
            item = raw.get(key)
            if item is None:
                if spec.required is not None:
                    raise ConfigError(spec.required, join(path, key))
                continue
            out[key] = spec.read(item, join(path, key))
        return out

    def schema(self) -> dict[str, Any]:
        properties = {key: spec.json() for key, spec in self.fields.items()}
        for key in self.extra_keys:
            properties.setdefault(key, {})
        out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        required = [key for key, spec in self.fields.items() if spec.required is not None]
        if required:
            out["required"] = required
        if self.then:
            out["allOf"] = list(self.then)
        return out


def _json_type_matches(spec: Spec, value: Any) -> bool:
    """Whether *value* has the JSON type *spec* describes (a mapping for a Block, a list for a ListOf, ...)."""
    if isinstance(spec, Block | MapOf):
        return isinstance(value, Mapping)
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    if isinstance(spec, Flag):
        return isinstance(value, bool)
    return not isinstance(value, Mapping | list)
