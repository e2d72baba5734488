"""Values passed between the process that runs a model's code and the worker that checks it, as JSON data.

A model answer whose text is code (``host.py``) is executed in a process of its own; what comes back — the
call results, the backends' state, a value the decoder computed — is data the worker rebuilds here, never code:
no pickle, no import, no call of anything the data names. Only these are rebuilt: ``None``, booleans, ints,
strings, floats (``inf``/``nan``/``-0.0`` kept), complex numbers, bytes, lists, tuples, sets, frozensets, dicts
(any hashable keys, in order), ``datetime`` dates, times, datetimes and timedeltas, and instances of classes
**already defined** in bfcl-eval's multi-turn backend modules (created with ``object.__new__`` and their
``__dict__`` filled, ``__init__`` never runs). Shared and cyclic lists, dicts and objects keep their sharing
(a directory's ``parent``). Anything else arrives as an opaque stand-in equal only to itself.
"""
from __future__ import annotations

import datetime
import sys
from typing import Any

BACKEND_MODULES = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."


class CodecError(ValueError):
    """The data is not a value this codec rebuilds."""


class Opaque:
    """A value that cannot be passed as data (a function, a module …): its ``repr`` only, equal only to itself."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def encode(value: Any) -> Any:
    """``value`` as JSON data (what cannot be data becomes an opaque ``repr``)."""
    return _Encoder().encode(value)


def decode(data: Any) -> Any:
    """The value ``encode`` wrote; ``CodecError`` when ``data`` is anything else."""
    return _Decoder().decode(data)


class _Encoder:
    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []  # what was numbered stays alive (ids are never reused while encoding)
        self.path: set[int] = set()  # tuples and sets being written (they cannot point back at themselves)

    def _number(self, value: Any) -> int:
        self.ids[id(value)] = len(self.ids)
        self.keep.append(value)
        return self.ids[id(value)]

    def encode(self, value: Any) -> Any:
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return {"float": repr(value)}
        if kind is complex:
            return {"complex": [repr(value.real), repr(value.imag)]}
        if kind in (bytes, bytearray):
            return {kind.__name__: value.hex()}
        if kind is datetime.timedelta:
            return {"timedelta": [value.days, value.seconds, value.microseconds]}
        if kind in (datetime.datetime, datetime.date, datetime.time):
            return {kind.__name__: value.isoformat()}
        if id(value) in self.ids:
            return {"ref": self.ids[id(value)]}
        if kind in (tuple, set, frozenset):
            if id(value) in self.path:
                return {"opaque": "<cycle>"}
            self.path.add(id(value))
            try:
                return {kind.__name__: [self.encode(v) for v in value]}
            finally:
                self.path.discard(id(value))
        if kind is list:
            number = self._number(value)
            return {"list": [self.encode(v) for v in value], "id": number}
        if kind is dict:
            number = self._number(value)
            return {"dict": [[self.encode(k), self.encode(v)] for k, v in value.items()], "id": number}
        module = getattr(kind, "__module__", "") or ""
        if module.startswith(BACKEND_MODULES) and isinstance(getattr(value, "__dict__", None), dict):
            number = self._number(value)
            return {"object": [module, kind.__qualname__], "id": number,
                    "attrs": {k: self.encode(v) for k, v in vars(value).items() if type(k) is str}}
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - a repr that fails is still a value
            text = f"<{kind.__name__} whose repr failed: {type(exc).__name__}>"
        return {"opaque": text}


def _backend_class(module: Any, qualname: Any) -> type:
    """A class defined in a backend module that is already imported (data never imports anything)."""
    if not (isinstance(module, str) and module.startswith(BACKEND_MODULES) and isinstance(qualname, str)):
        raise CodecError(f"not a backend class: {module!r}.{qualname!r}")
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None else None
    if not isinstance(found, type) or found.__module__ != module or found.__qualname__ != qualname:
        raise CodecError(f"not a backend class: {module}.{qualname}")
    return found


class _Decoder:
    def __init__(self) -> None:
        self.made: dict[int, Any] = {}

    def _register(self, number: Any, value: Any) -> Any:
        if type(number) is not int or number in self.made:
            raise CodecError(f"bad or repeated id {number!r}")
        self.made[number] = value
        return value

    def decode(self, data: Any) -> Any:
        if data is None or type(data) in (bool, int, str):
            return data
        if type(data) is not dict or not data:
            raise CodecError(f"not an encoded value: {type(data).__name__}")
        keys = set(data)
        try:
            if keys == {"float"}:
                return float(data["float"])
            if keys == {"complex"}:
                real, imag = data["complex"]
                return complex(float(real), float(imag))
            if keys == {"bytes"}:
                return bytes.fromhex(data["bytes"])
            if keys == {"bytearray"}:
                return bytearray.fromhex(data["bytearray"])
            if keys == {"timedelta"}:
                days, seconds, micro = data["timedelta"]
                return datetime.timedelta(days=days, seconds=seconds, microseconds=micro)
            for kind in (datetime.datetime, datetime.date, datetime.time):
                if keys == {kind.__name__}:
                    return kind.fromisoformat(data[kind.__name__])
            if keys == {"opaque"}:
                return Opaque(str(data["opaque"]))
            if keys == {"ref"}:
                return self.made[data["ref"]]
            if keys == {"tuple"}:
                return tuple(self.decode(v) for v in data["tuple"])
            if keys == {"set"}:
                return {self.decode(v) for v in data["set"]}
            if keys == {"frozenset"}:
                return frozenset(self.decode(v) for v in data["frozenset"])
            if keys == {"list", "id"}:
                made: list = self._register(data["id"], [])
                made.extend(self.decode(v) for v in data["list"])
                return made
            if keys == {"dict", "id"}:
                mapping: dict = self._register(data["id"], {})
                for key, value in data["dict"]:
                    mapping[self.decode(key)] = self.decode(value)
                return mapping
            if keys == {"object", "id", "attrs"}:
                cls = _backend_class(*data["object"])
                instance = self._register(data["id"], object.__new__(cls))
                attrs = data["attrs"]
                if type(attrs) is not dict:
                    raise CodecError("attrs is not an object")
                for name, value in attrs.items():
                    instance.__dict__[name] = self.decode(value)
                return instance
        except CodecError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
            raise CodecError(f"bad {sorted(keys)}: {type(exc).__name__}: {exc}") from None
        raise CodecError(f"unknown encoding {sorted(keys)}")
