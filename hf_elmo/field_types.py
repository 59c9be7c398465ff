"""The type of each configuration field, checked when a config or tokenizer is made or loaded.

A hand-edited config.json with ``"use_skip_connections": "false"`` would otherwise be read as true (a
non-empty string), ``"lm_vocab": 5`` would fail deep inside with a TypeError; one table per class names every
field's type, and a value of another type is refused naming the field, the value and what it should be.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple


class FieldType(NamedTuple):
    description: str
    accepts: Callable[[Any], bool]


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, (list, tuple)) and all(check(item) for item in value)


INTEGER = FieldType("an integer", _is_integer)
NUMBER = FieldType("a number", _is_number)
BOOLEAN = FieldType("true or false", lambda value: isinstance(value, bool))
TEXT = FieldType("a string", lambda value: isinstance(value, str))
MAPPING = FieldType("an object (a mapping)", lambda value: isinstance(value, Mapping))
INTEGER_LIST = FieldType("a list of integers", _list_of(_is_integer))
TEXT_LIST = FieldType("a list of strings", _list_of(lambda item: isinstance(item, str)))
INTEGER_PAIRS = FieldType(
    "a list of [width, count] integer pairs",
    _list_of(lambda item: isinstance(item, (list, tuple)) and len(item) == 2 and all(map(_is_integer, item))),
)


def one_of(*choices: str) -> FieldType:
    return FieldType("one of " + ", ".join(map(repr, choices)), lambda value: isinstance(value, str) and value in choices)


def optional(field_type: FieldType) -> FieldType:
    return FieldType(field_type.description + " or null", lambda value: value is None or field_type.accepts(value))


def type_problems(values: Mapping[str, Any], table: Mapping[str, FieldType]) -> list[str]:
    """One message per value of `values` whose field in `table` has another type."""
    return [
        f"{name} must be {field_type.description}, got {values[name]!r}"
        for name, field_type in table.items()
        if name in values and not field_type.accepts(values[name])
    ]


def load_json_file(path: str | os.PathLike, what: str) -> Any:
    """A hand-edited JSON file (options, vocabularies, results); a missing file or broken JSON is a ValueError
    naming `what` and the path. A UTF-8 byte order mark is accepted."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"{what} not found: {os.fspath(path)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{what} {os.fspath(path)} is not valid JSON: {error}") from None

