"""The options of `hf-elmo pretrain` and `hf_elmo.pretraining.run`, each written once, in `PretrainingArguments`.

A field says everything about its option; the rest is derived from the fields:
- the command line (`add_dataclass_arguments`): `flags` (the spellings, default `--field-name`; the first one names
  the option in messages and in the run identity), `help`, the `group` of `--help`, `metavar`; the type gives
  argparse's type, `Literal` its choices, `list` nargs; a field without a default is required;
- `check`: the range check, a function of the value returning what is wrong with it, or None (`problems`);
- `trainer`: the field is a `transformers.TrainingArguments` field of the same name, passed to it as it is;
- `config`: the `ElmoConfig` field the option sets (`ConfigField`, with the conversion when the option's value is
  not the config's);
- `architecture`: an architecture option, and its value when neither given nor read from `--init-from`'s config;
  None in the dataclass means "not given" (a given one must agree with the `--init-from` model);
- `identity`: part of the run identity (default); resuming with another value would continue another run than the
  one asked for (`added_later`: the option is newer than some recorded runs, which had its default);
- `path`: recorded as an absolute path in the run identity when it names an existing file or folder.

This module imports neither torch, numpy nor transformers: `hf-elmo pretrain --help` reads it. transformers'
`HfArgumentParser` would build the parser from such a dataclass too, but importing it loads the transformers
package: numpy and +0.7 s on transformers 5, torch and +3 s on 4.57 (`python -X importtime`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Literal, NamedTuple

GROUPS = {
    "data": None,
    "model": "The architecture options default to the values shown, or with --init-from to that model's (given "
    "ones must agree with it).",
    "training": None,
}


class ConfigField(NamedTuple):
    """The `ElmoConfig` field an option sets, and the conversions of its value both ways."""

    name: str
    from_option: typing.Callable = lambda value: value
    to_option: typing.Callable = lambda value: value


def at_least(minimum):
    return lambda value: None if value is None or value >= minimum else f"must be at least {minimum}, got {value}"


def above_zero(value):
    return None if value is None or 0 < value < math.inf else f"must be above 0, got {value}"


def non_negative(value):
    return None if 0 <= value < math.inf else f"must be a number >= 0, got {value}"


def fraction(value):
    return None if 0 <= value < 1 else f"must be in [0, 1), got {value}"


def _filters_from_json(text: str) -> list:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--filters is not JSON: {error}") from None


def _filters_to_json(filters: list) -> str:
    return json.dumps(filters, separators=(",", ":"))


def option(default=MISSING, help: str = "", *, group: str, **metadata):
    """A dataclass field holding its option's description (see the module's docstring)."""
    return field(default=default, metadata={"help": help, "group": group, **metadata})


def data(default=MISSING, help: str = "", **metadata):
    return option(default, help, group="data", **metadata)


def model(default=MISSING, help: str = "", **metadata):
    return option(default, help, group="model", **metadata)


def training(default=MISSING, help: str = "", **metadata):
    return option(default, help, group="training", **metadata)


@dataclass(kw_only=True)
class PretrainingArguments:
    """What `hf-elmo pretrain` is given; `hf_elmo.pretraining.run.run` takes it."""

    train_file: list[str] = data(help="corpus files: one sentence a line, words split by spaces", path=True)
    dev_file: str | None = data(None, "held-out corpus for perplexity", path=True)
    vocab: str | None = data(
        None, "vocabulary file (<S>, </S>, <UNK>, then by frequency); built from the train files if omitted", path=True)
    # The vocabulary limits are checked by the vocabulary builder's own check (also `hf-elmo corpus vocab`'s).
    min_count: int = data(3, "min word count (>= 1) when building the vocabulary")
    max_vocab: int | None = data(
        None, "max vocabulary size when building it, the three specials <S>, </S>, <UNK> included (>= 4)")
    max_words: int = data(50, "longer sentences are cut into pieces of this many words (>= 1)", check=at_least(1))

    projection_dim: int | None = model(
        None, "LSTM output (projection) size P; layers are 2P wide", architecture=128,
        config=ConfigField("projection_dim"))
    cell_dim: int | None = model(None, "LSTM cell size", architecture=512, config=ConfigField("lstm_cell_dim"))
    layers: int | None = model(None, "biLSTM layers", architecture=2, config=ConfigField("num_lstm_layers"))
    char_dim: int | None = model(
        None, "character embedding size", architecture=16, config=ConfigField("char_embedding_dim"))
    filters: str | None = model(
        None, "JSON [[width, count], ...]", architecture="[[1,32],[2,32],[3,64],[4,128],[5,256]]",
        config=ConfigField("char_cnn_filters", _filters_from_json, _filters_to_json))
    highway: int | None = model(
        None, "highway layers after the character CNN", architecture=1, config=ConfigField("num_highway_layers"))
    max_characters: int | None = model(
        None, "character ids per word (bilm-tf: 50)", architecture=50, config=ConfigField("max_characters_per_token"))
    char_scheme: Literal["bytes", "dictionary"] | None = model(
        None, "how words become character ids: UTF-8 bytes (AllenNLP, bilm-tf; any text) or one id per character "
        "from a character vocabulary built from the train files (ELMoForManyLangs; with --init-from, that model's "
        "vocabulary), saved as char_vocab.json", architecture="bytes", config=ConfigField("char_scheme"),
        added_later=True)
    char_min_count: int = model(
        2, "dictionary scheme: characters seen fewer times in the train files share the <oov> id (>= 1)",
        check=at_least(1), added_later=True)
    cell_clip: float = model(3.0, "clip LSTM cell values to [-x, x]", config=ConfigField("cell_clip"))
    proj_clip: float = model(3.0, "clip LSTM outputs to [-x, x]", config=ConfigField("proj_clip"))
    no_skip_connections: bool | None = model(
        None, "no residual connection around layers >= 2", architecture=False,
        config=ConfigField("use_skip_connections", lambda value: not value, lambda value: not value))
    softmax: Literal["full", "sampled"] = model(
        "full", "full softmax over the vocabulary, or sampled (cheaper for large vocabularies)",
        config=ConfigField("lm_softmax"))
    num_sampled: int = model(8192, "negatives per batch (sampled softmax)", config=ConfigField("lm_num_sampled"))
    dropout: float = model(0.1, "dropout on the biLSTM outputs", check=fraction, config=ConfigField("lm_dropout"))
    segmenter: str = model("auto", "tokenizer segmenter saved with the model")

    output_dir: str = training(
        help="run folder: checkpoints, then the model, vocabulary and summary", flags=("--output-dir", "--output"),
        trainer=True, identity=False)
    num_train_epochs: float = training(
        1.0, "passes over the training data (> 0)", flags=("--epochs",), check=above_zero, trainer=True,
        identity=False)
    # None, not TrainingArguments' -1, when not given: `--max-steps -1` is refused like any step count below 1.
    max_steps: int | None = training(
        None, "optimiser steps (>= 1); when given it overrides --epochs", check=at_least(1), identity=False)
    per_device_train_batch_size: int = training(
        64, "sentences per device", flags=("--batch-size",), check=at_least(1), trainer=True)
    gradient_accumulation_steps: int = training(1, "batches per optimiser step", check=at_least(1), trainer=True)
    learning_rate: float = training(
        2e-3, "peak learning rate (AdamW, linear decay)", flags=("--lr",), check=non_negative, trainer=True)
    # TrainingArguments' name for it depends on its version (utils.transformers_versions.warmup_arguments).
    warmup_ratio: float = training(0.02, "fraction of the steps spent warming up", check=fraction)
    weight_decay: float = training(0.0, "AdamW weight decay", check=non_negative, trainer=True)
    max_grad_norm: float = training(1.0, "clip the gradient norm to this", check=non_negative, trainer=True)
    eval_steps: int = training(500, "dev perplexity every this many steps", check=at_least(1), trainer=True,
                               identity=False)
    save_steps: int = training(500, "checkpoint every this many steps", check=at_least(1), trainer=True,
                               identity=False)
    save_total_limit: int = training(2, "checkpoints kept", trainer=True, identity=False)
    logging_steps: int = training(50, "log the loss every this many steps", check=at_least(1), trainer=True,
                                  identity=False)
    seed: int = training(42, "initialisation and data order", trainer=True)
    threads: int | None = training(None, "torch CPU threads per process", check=at_least(1), identity=False)
    no_resume: bool = training(False, "start over even if checkpoints exist", identity=False)
    init_from: str | None = training(
        None, "start from the weights of a model of the same architecture, with a fresh optimiser and schedule "
        "(continued or domain-adaptive pretraining): a finished pretraining run, or an encoder-only folder such as "
        "the shipped default (pass 'default') or a converted AllenNLP model, whose softmax then starts fresh; the "
        "softmax is also fresh when the run's vocabulary differs. A checkpoint in --output-dir takes precedence",
        metavar="FOLDER", path=True)
    time_budget_minutes: float | None = training(
        None, "stop (with a checkpoint) once this much training time (> 0 minutes) has passed in this run",
        check=above_zero, identity=False)
    # The biLM Trainer's own grouping (hf_elmo.pretraining.trainer), not TrainingArguments'.
    group_by_length: bool = training(
        True, "batch sentences of similar length together (random groups of 50 batches, each sorted by length): the "
        "biLSTM runs as many steps as a batch's longest sentence, so mixed lengths waste most of its work")
    disable_tqdm: bool = training(False, "no progress bar", flags=("--no-progress",), trainer=True, identity=False)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> PretrainingArguments:
        """The options of a parsed command line (an architecture option not given is absent there: None here)."""
        given = {item.name: getattr(namespace, item.name) for item in fields(cls) if hasattr(namespace, item.name)}
        return cls(**given)

    def problems(self) -> list[str]:
        """What is wrong with the options' values, one line each (the model options are ElmoConfig's to check)."""
        found = []
        for item in fields(self):
            check = item.metadata.get("check")
            problem = check(getattr(self, item.name)) if check else None
            if problem:
                found.append(f"{flag(item)} {problem}")
        return found


FIELDS = {item.name: item for item in fields(PretrainingArguments)}


def flag(item) -> str:
    """The option's spelling on the command line and in messages."""
    return item.metadata.get("flags", ("--" + item.name.replace("_", "-"),))[0]


def option_name(item) -> str:
    """The option's name in a run identity: its flag as a Python name (`--lr`: lr)."""
    return flag(item)[2:].replace("-", "_")


# Derived tables: what the library reads.
ARCHITECTURE_OPTIONS = {name: item for name, item in FIELDS.items() if "architecture" in item.metadata}
CONFIG_FIELDS = {name: item.metadata["config"] for name, item in FIELDS.items() if "config" in item.metadata}
TRAINER_FIELDS = tuple(name for name, item in FIELDS.items() if item.metadata.get("trainer"))
RUN_IDENTITY_FIELDS = tuple(name for name, item in FIELDS.items() if item.metadata.get("identity", True))


def default_value(item):
    """The value of an option not given (an architecture option's when there is no model to take it from)."""
    return item.metadata.get("architecture", item.default)


def run_identity(options: PretrainingArguments) -> dict:
    """The options that define the run, by option name (paths absolute when they name what exists)."""
    identity = {}
    for name in RUN_IDENTITY_FIELDS:
        item, value = FIELDS[name], getattr(options, name)
        if item.metadata.get("path") and value:
            value = [_absolute(path) for path in value] if isinstance(value, list) else _absolute(value)
        identity[option_name(item)] = value
    return identity


def _absolute(path: str) -> str:
    return os.path.abspath(path) if os.path.exists(path) else path


# Options newer than some recorded runs, with the value those runs had.
OPTIONS_ADDED_LATER = {option_name(item): default_value(item) for item in FIELDS.values()
                       if item.metadata.get("added_later")}


def add_dataclass_arguments(parser: argparse.ArgumentParser, dataclass_type=PretrainingArguments) -> None:
    """The command-line options of `dataclass_type`'s fields, in the groups they name."""
    groups = {}
    hints = typing.get_type_hints(dataclass_type)
    for item in fields(dataclass_type):
        metadata = item.metadata
        group = groups.get(metadata["group"])
        if group is None:
            group = groups[metadata["group"]] = parser.add_argument_group(metadata["group"], GROUPS[metadata["group"]])
        kind = hints[item.name]
        if type(None) in typing.get_args(kind):  # X | None
            kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        arguments = {"dest": item.name, "help": metadata["help"]}
        if "architecture" in metadata:  # absent unless given, so that --init-from's config can fill it in
            arguments["default"] = argparse.SUPPRESS
            arguments["help"] += f" (default: {metadata['architecture']})"
        elif item.default is MISSING:
            arguments["required"] = True
        else:
            arguments["default"] = item.default
        if kind is bool:
            arguments["action"] = argparse.BooleanOptionalAction if item.default is True else "store_true"
        else:
            if typing.get_origin(kind) is Literal:
                arguments["choices"], kind = typing.get_args(kind), str
            else:
                arguments["metavar"] = metadata.get("metavar", option_name(item).upper())
            if typing.get_origin(kind) is list:
                arguments["nargs"], kind = "+", typing.get_args(kind)[0]
            arguments["type"] = kind
        group.add_argument(*metadata.get("flags", (flag(item),)), **arguments)


__all__ = ["ARCHITECTURE_OPTIONS", "CONFIG_FIELDS", "ConfigField", "OPTIONS_ADDED_LATER", "PretrainingArguments",
           "RUN_IDENTITY_FIELDS", "TRAINER_FIELDS", "add_dataclass_arguments", "default_value", "flag", "run_identity"]
