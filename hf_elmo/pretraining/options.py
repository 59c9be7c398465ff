"""The options of `hf-elmo pretrain` and of `hf_elmo.pretraining.run`, written once.

As in transformers' `run_ner.py` (and `hf_elmo.finetuning.options`), one dataclass per role; the library takes
`PretrainingArguments`, all of them in one object. The command line is made from the roles (`COMMAND_OPTIONS`) by
`hf_elmo.cli.common.add_dataclass_options`, which reads the fields as transformers' `HfArgumentParser` does: a
field's metadata goes to `add_argument`, so it holds `help`, `aliases` (the spellings; the first one names the
option in messages and in the run identity) and argparse keywords, nothing else. What a field says beyond argparse
is an `Option` (`hf_elmo.utils.options`, shared with fine-tuning) in its `Annotated` type, which both parsers read
past:
- `check`: its range check, a function of the value returning what is wrong with it, or None (`problems`);
- `architecture`: an architecture option, and its value when neither given nor read from `--init-from`'s config
  (None, or False for a switch, means "not given": a given one must agree with the `--init-from` model);
- `config`: the conversion to the `ElmoConfig` field it sets, when its value is not the config's as it is;
- `path`: recorded as an absolute path in the run identity when it names an existing file or folder;
- `added_later`: a run-identity option newer than some recorded runs, which had its default.

Roles: `ArchitectureArguments` and `ModelArguments` are `ElmoConfig` fields of the same names (or `config`'s);
the options of `TrainingOptions` and `RunArguments` that are `transformers.TrainingArguments` fields are passed to
it by name; every option but `RunArguments`' is part of the run identity (resuming with another value would
continue another run than the one asked for; step counts, time budgets and the checkpoint/eval/log cadence may
change between sessions of the same run).

This module imports neither torch, numpy nor transformers: `hf-elmo pretrain --help` reads it.
"""

import json
import os
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Literal, NamedTuple

from ..utils.options import (
    Option,
    above_zero,
    added_later,
    at_least,
    fraction,
    must_be,
    non_negative,
    option_field,
    options_of,
    spelling,
)
from ..utils.options import problems as _problems


class ConfigField(NamedTuple):
    """The `ElmoConfig` field an option sets, and the conversions of its value both ways."""

    name: str
    from_option: typing.Callable
    to_option: typing.Callable


# -1, TrainingArguments' default: --epochs decides.
_steps_or_epochs = must_be("at least 1", lambda value: value == -1 or value >= 1)


def _filters_from_json(text: str) -> list:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--filters is not JSON: {error}") from None


def _filters_to_json(filters: list) -> str:
    return json.dumps(filters, separators=(",", ":"))


@dataclass
class DataArguments:
    """The corpus, and the vocabularies and batches made from it."""

    _argument_group_name = "data"

    train_file: Annotated[list[str] | None, Option(path=True)] = option_field(
        None, "corpus files: one sentence a line, words split by spaces", required=True)
    dev_file: Annotated[str | None, Option(path=True)] = option_field(None, "held-out corpus for perplexity")
    vocab: Annotated[str | None, Option(path=True)] = option_field(
        None, "vocabulary file (<S>, </S>, <UNK>, then by frequency); built from the train files if omitted")
    # The vocabulary limits are the vocabulary builder's own check (pretraining.data.check_vocabulary_limits).
    min_count: int = option_field(3, "min word count (>= 1) when building the vocabulary")
    max_vocab: int | None = option_field(
        None, "max vocabulary size when building it, the three specials <S>, </S>, <UNK> included (>= 4)")
    max_words: Annotated[int, Option(check=at_least(1))] = option_field(
        50, "longer sentences are cut into pieces of this many words (>= 1)")
    char_min_count: Annotated[int, Option(check=at_least(1), added_later=True)] = option_field(
        2, "dictionary scheme: characters seen fewer times in the train files share the <oov> id (>= 1)")
    segmenter: Literal["auto", "jieba", "chars", "whitespace"] = option_field(  # text_elmo.SEGMENTERS
        "auto", "tokenizer segmenter saved with the model")
    # The biLM Trainer's own grouping (pretraining.trainer), not TrainingArguments'.
    group_by_length: bool = option_field(
        True, "batch sentences of similar length together (random groups of 50 batches, each sorted by length): the "
        "biLSTM runs as many steps as a batch's longest sentence, so mixed lengths waste most of its work")


@dataclass
class ArchitectureArguments:
    """The `ElmoConfig` fields that define the architecture: without --init-from they default to the values shown;
    with it to that model's, which given ones must agree with."""

    _argument_group_name = "architecture"

    projection_dim: Annotated[int | None, Option(architecture=128)] = option_field(
        None, "LSTM output (projection) size P; layers are 2P wide")
    lstm_cell_dim: Annotated[int | None, Option(architecture=512)] = option_field(
        None, "LSTM cell size", aliases=["--cell-dim"])
    num_lstm_layers: Annotated[int | None, Option(architecture=2)] = option_field(
        None, "biLSTM layers", aliases=["--layers"])
    char_embedding_dim: Annotated[int | None, Option(architecture=16)] = option_field(
        None, "character embedding size", aliases=["--char-dim"])
    char_cnn_filters: Annotated[str | None, Option(
        architecture="[[1,32],[2,32],[3,64],[4,128],[5,256]]",
        config=ConfigField("char_cnn_filters", _filters_from_json, _filters_to_json))] = option_field(
        None, "JSON [[width, count], ...]", aliases=["--filters"])
    num_highway_layers: Annotated[int | None, Option(architecture=1)] = option_field(
        None, "highway layers after the character CNN", aliases=["--highway"])
    max_characters_per_token: Annotated[int | None, Option(architecture=50)] = option_field(
        None, "character ids per word (bilm-tf: 50)", aliases=["--max-characters"])
    char_scheme: Annotated[Literal["bytes", "dictionary"] | None, Option(architecture="bytes", added_later=True)] = \
        option_field(None, "how words become character ids: UTF-8 bytes (AllenNLP, bilm-tf; any text) or one id "
                     "per character from a character vocabulary built from the train files (ELMoForManyLangs; with "
                     "--init-from, that model's vocabulary), saved as char_vocab.json")
    no_skip_connections: Annotated[bool, Option(
        architecture=False, config=ConfigField("use_skip_connections", lambda value: not value,
                                               lambda value: not value))] = option_field(
        False, "no residual connection around layers >= 2")


@dataclass
class ModelArguments:
    """The other `ElmoConfig` fields pretraining sets: clipping and the language-model head."""

    _argument_group_name = "model"

    cell_clip: float = option_field(3.0, "clip LSTM cell values to [-x, x]")
    proj_clip: float = option_field(3.0, "clip LSTM outputs to [-x, x]")
    lm_softmax: Literal["full", "sampled"] = option_field(
        "full", "full softmax over the vocabulary, or sampled (cheaper for large vocabularies)", aliases=["--softmax"])
    lm_num_sampled: int = option_field(8192, "negatives per batch (sampled softmax)", aliases=["--num-sampled"])
    lm_dropout: Annotated[float, Option(check=fraction)] = option_field(
        0.1, "dropout on the biLSTM outputs", aliases=["--dropout"])


@dataclass
class TrainingOptions:
    """How the model is trained: `TrainingArguments` fields of the same names, with hf-elmo's defaults."""

    _argument_group_name = "training"

    per_device_train_batch_size: Annotated[int, Option(check=at_least(1))] = option_field(
        64, "sentences per device", aliases=["--batch-size"])
    gradient_accumulation_steps: Annotated[int, Option(check=at_least(1))] = option_field(
        1, "batches per optimiser step")
    learning_rate: Annotated[float, Option(check=non_negative)] = option_field(
        2e-3, "peak learning rate (AdamW, linear decay)", aliases=["--lr"])
    # TrainingArguments' name for it depends on its version (utils.transformers_versions.warmup_arguments).
    warmup_ratio: Annotated[float, Option(check=fraction)] = option_field(
        0.02, "fraction of the steps spent warming up")
    weight_decay: Annotated[float, Option(check=non_negative)] = option_field(0.0, "AdamW weight decay")
    max_grad_norm: Annotated[float, Option(check=non_negative)] = option_field(1.0, "clip the gradient norm to this")
    seed: int = option_field(42, "initialisation and data order")
    init_from: Annotated[str | None, Option(path=True)] = option_field(
        None, "start from the weights of a model of the same architecture, with a fresh optimiser and schedule "
        "(continued or domain-adaptive pretraining): a finished pretraining run, or an encoder-only folder such as "
        "the shipped default (pass 'default') or a converted AllenNLP model, whose softmax then starts fresh; the "
        "softmax is also fresh when the run's vocabulary differs. A checkpoint in --output-dir takes precedence",
        metavar="FOLDER")


@dataclass
class RunArguments:
    """Where the run writes, how long it trains and how often it reports: what a resumed run may change."""

    _argument_group_name = "the run"

    output_dir: str | None = option_field(
        None, "run folder: checkpoints, then the model, vocabulary and summary", aliases=["--output-dir", "--output"],
        required=True)
    num_train_epochs: Annotated[float, Option(check=above_zero)] = option_field(
        1.0, "passes over the training data (> 0)", aliases=["--epochs"])
    max_steps: Annotated[int, Option(check=_steps_or_epochs)] = option_field(
        -1, "optimiser steps (>= 1); when given it overrides --epochs")
    eval_steps: Annotated[int, Option(check=at_least(1))] = option_field(500, "dev perplexity every this many steps")
    save_steps: Annotated[int, Option(check=at_least(1))] = option_field(500, "checkpoint every this many steps")
    save_total_limit: int = option_field(2, "checkpoints kept")
    logging_steps: Annotated[int, Option(check=at_least(1))] = option_field(50, "log the loss every this many steps")
    threads: Annotated[int | None, Option(check=at_least(1))] = option_field(None, "torch CPU threads per process")
    no_resume: bool = option_field(False, "start over even if checkpoints exist")
    time_budget_minutes: Annotated[float | None, Option(check=above_zero)] = option_field(
        None, "stop (with a checkpoint) once this much training time (> 0 minutes) has passed in this run")
    disable_tqdm: bool = option_field(False, "no progress bar", aliases=["--no-progress"])


# The options of `hf-elmo pretrain`, in the order --help lists them.
COMMAND_OPTIONS = (DataArguments, ArchitectureArguments, ModelArguments, TrainingOptions, RunArguments)


@dataclass
class PretrainingArguments(RunArguments, TrainingOptions, ModelArguments, ArchitectureArguments, DataArguments):
    """What `hf-elmo pretrain` is given: every role's options in one object."""

    @classmethod
    def from_namespace(cls, namespace) -> "PretrainingArguments":
        """The options of a parsed command line."""
        return cls(**{item.name: getattr(namespace, item.name) for item in fields(cls)})

    def problems(self) -> list[str]:
        """What is wrong with the values, one line each (the model options are ElmoConfig's to check)."""
        return _problems(self)


FIELDS = {item.name: item for item in fields(PretrainingArguments)}
OPTIONS = options_of(PretrainingArguments)


def flag(name: str) -> str:
    """The option's spelling on the command line and in messages."""
    return spelling(FIELDS[name])


def option_name(name: str) -> str:
    """The option's name in a run identity: its flag as a Python name (`--lr`: lr)."""
    return flag(name)[2:].replace("-", "_")


def _names(*roles) -> tuple[str, ...]:
    return tuple(item.name for role in roles for item in fields(role))


ARCHITECTURE_OPTIONS = _names(ArchitectureArguments)
CONFIG_OPTIONS = _names(ArchitectureArguments, ModelArguments)
RUN_IDENTITY_OPTIONS = _names(DataArguments, ArchitectureArguments, ModelArguments, TrainingOptions)
# The options' values when not given and no --init-from model gives them.
ARCHITECTURE_DEFAULTS = {name: OPTIONS[name].architecture for name in ARCHITECTURE_OPTIONS}
# Options newer than some recorded runs, with the value those runs had.
OPTIONS_ADDED_LATER = added_later(PretrainingArguments, option_name,
                                  lambda name: ARCHITECTURE_DEFAULTS.get(name, FIELDS[name].default))


def config_field(name: str) -> ConfigField:
    """The `ElmoConfig` field the option `name` sets."""
    same = ConfigField(name, lambda value: value, lambda value: value)
    return OPTIONS[name].config or same


def trainer_options(training_argument_names) -> tuple[str, ...]:
    """The options passed to `TrainingArguments` by name: those of the training and run roles it has a field of."""
    return tuple(name for name in _names(TrainingOptions, RunArguments) if name in training_argument_names)


def run_identity(options: PretrainingArguments) -> dict:
    """The options that define the run, by option name (paths absolute when they name what exists)."""
    identity = {}
    for name in RUN_IDENTITY_OPTIONS:
        value = getattr(options, name)
        if OPTIONS[name].path and value:
            value = [_absolute(path) for path in value] if isinstance(value, list) else _absolute(value)
        identity[option_name(name)] = value
    return identity


def _absolute(path: str) -> str:
    return os.path.abspath(path) if os.path.exists(path) else path


__all__ = ["ARCHITECTURE_DEFAULTS", "ARCHITECTURE_OPTIONS", "COMMAND_OPTIONS", "CONFIG_OPTIONS", "OPTIONS_ADDED_LATER",
           "RUN_IDENTITY_OPTIONS", "ArchitectureArguments", "ConfigField", "DataArguments", "ModelArguments", "Option",
           "PretrainingArguments", "RunArguments", "TrainingOptions", "config_field", "flag", "run_identity",
           "trainer_options"]
