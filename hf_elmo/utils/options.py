"""What an options dataclass says beyond argparse, read the same way by pretraining and fine-tuning.

The options of `hf-elmo pretrain` (`hf_elmo.pretraining.options`) and of `hf-elmo finetune train` /
`train-classifier` (`hf_elmo.finetuning.options`) are dataclass fields: their metadata goes to `add_argument`
(`hf_elmo.cli.common.add_dataclass_options`, transformers' `HfArgumentParser`), so what it does not hold is an
`Option` in the field's `Annotated` type, which both parsers read past:
- `check`: its range check, a function of the value returning what is wrong with it ("must be ..., got ...") or
  None; `problems` collects them, each named by the option's flag;
- `added_later`: a run-identity option newer than some recorded runs, which had its default (`added_later`
  gives those values, for `hf_elmo.utils.checkpoints.check_same_run`), so a run recorded before it still resumes;
- `architecture`, `config`, `path`: pretraining's (see `hf_elmo.pretraining.options`).

Standard library only: `--help` reads it.
"""

import dataclasses
import functools
import math
import typing
from typing import Any, NamedTuple


class Option(NamedTuple):
    """What an option's field says beyond argparse (see the module's docstring)."""

    check: typing.Callable | None = None
    architecture: Any = None
    config: Any = None
    path: bool = False
    added_later: bool = False


def option_field(default, help: str, **metadata):
    """A dataclass field with its command-line description (`metadata` goes to `add_argument` as it is); a dict
    default is a fresh one for each object."""
    if isinstance(default, dict):
        return dataclasses.field(default_factory=dict, metadata={"help": help, **metadata})
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def must_be(rule: str, holds: typing.Callable) -> typing.Callable:
    """A range check: None when `holds(value)`, else "must be `rule`, got value"."""
    return lambda value: None if holds(value) else f"must be {rule}, got {value}"


def optional(check: typing.Callable) -> typing.Callable:
    """`check`, with None ("not given") let through."""
    return lambda value: None if value is None else check(value)


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# The range checks of pretraining's options (values parsed from the command line).
def at_least(minimum):
    return must_be(f"at least {minimum}", lambda value: value is None or value >= minimum)


above_zero = must_be("above 0", lambda value: value is None or 0 < value < math.inf)
non_negative = must_be("a number >= 0", lambda value: is_number(value) and value >= 0)
fraction = must_be("in [0, 1)", lambda value: 0 <= value < 1)
# Those of fine-tuning's, which the library also takes from Python callers: of the right type too.
positive_integer = must_be("a positive integer", lambda value: is_int(value) and value >= 1)
positive_number = must_be("a positive number", lambda value: is_number(value) and value > 0)


@functools.cache
def options_of(dataclass_type) -> dict[str, Option]:
    """Each field's `Option` (an empty one where its type says none), by field name, in field order."""
    hints = typing.get_type_hints(dataclass_type, include_extras=True)
    return {item.name: next((extra for extra in getattr(hints[item.name], "__metadata__", ())
                             if isinstance(extra, Option)), Option())
            for item in dataclasses.fields(dataclass_type)}


def spellings(item: dataclasses.Field) -> list[str]:
    """The option's flags: its `aliases`, then `--field-name` (HfArgumentParser's spellings, less `--field_name`)."""
    return list(dict.fromkeys([*item.metadata.get("aliases", []), "--" + item.name.replace("_", "-")]))


def spelling(item: dataclasses.Field) -> str:
    """The option's flag on the command line and in messages: its first alias, else `--field-name`."""
    return spellings(item)[0]


def problems(options) -> list[str]:
    """What is wrong with the values of the options dataclass `options`, one line each, named by flag."""
    found = []
    for item in dataclasses.fields(options):
        check = options_of(type(options))[item.name].check
        problem = check(getattr(options, item.name)) if check else None
        if problem:
            found.append(f"{spelling(item)} {problem}")
    return found


def default_of(item: dataclasses.Field):
    return item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default


def added_later(dataclass_type, identity_name=lambda name: name, value_before=None) -> dict:
    """The run-identity options newer than some recorded runs (`added_later`), by their name in the identity, with
    the value those runs had: `value_before(name)`, else the field's default."""
    fields = {item.name: item for item in dataclasses.fields(dataclass_type)}
    return {identity_name(name): value_before(name) if value_before else default_of(fields[name])
            for name, option in options_of(dataclass_type).items() if option.added_later}


__all__ = ["Option", "above_zero", "added_later", "at_least", "default_of", "fraction", "is_int", "is_number",
           "must_be", "non_negative", "optional", "options_of", "positive_integer", "positive_number", "problems",
           "spelling"]
