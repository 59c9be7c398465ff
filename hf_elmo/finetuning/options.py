"""The options of `hf-elmo finetune train` / `train-classifier` and of `hf_elmo.finetuning.run`, written once.

As in transformers' `run_ner.py`, one dataclass per role: the biLM and the head (`ModelArguments`, and the
options of one head only: `TaggerArguments`, `ClassifierArguments`), how the examples are read (`DataArguments`;
the files themselves, `DataFiles` and `HubDataset`, only exist on the command line), the training knobs
(`TrainingOptions`) and where and how the run writes (`RunArguments`). The library takes `FinetuneOptions`, all
of them in one object. The command line is made from the dataclasses of each sub-command (`COMMAND_OPTIONS`) by
`hf_elmo.cli.common.add_dataclass_options`, which reads the fields as transformers' `HfArgumentParser` does and
stays checked against it (tests/commands/test_finetune_options.py): a field's metadata goes to `add_argument`, so
it holds `help`, `aliases` (the short spellings, the first one named in errors) and argparse keywords, nothing
else; a dataclass's `_argument_group_name` is its --help section.

- Range checks: an `Option(check=...)` (`hf_elmo.utils.options`, shared with pretraining) in a field's `Annotated`
  type, run by each dataclass's `__post_init__` with the checks of switches and choices, so a `FinetuneOptions`
  out of range is never made; the error (`OptionError`) names the command-line spelling.
- Run identity (what a killed run must be resumed with): every option but `RunArguments`'. A run-identity option
  added since runs were first recorded says `Option(added_later=True)`: those runs had its default
  (`OPTIONS_ADDED_LATER`), and still resume.
- The training knobs are `transformers.TrainingArguments` fields of the same names and meaning, passed to it by
  name (`run._training_arguments`: every option that is a `TrainingArguments` field), the rest of
  `TrainingArguments` fixed by how hf-elmo fine-tunes. `TrainingOptions` declares only the knobs the command
  offers, with hf-elmo's defaults and spellings (32 sentences a batch, not 8; epochs and rate per task); it is not
  `TrainingArguments` itself because importing that imports torch (3 s), which `--help` and the checks made
  before any work must not.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Literal

from ..utils.options import (
    Option,
    added_later,
    is_int,
    is_number,
    must_be,
    non_negative,
    option_field,
    optional,
    positive_integer,
    positive_number,
    problems,
    spelling,
)

# A switch whose default None means "decided from the data": `--x` alone turns it on (`--no-x` off).
_SWITCH = {"nargs": "?", "const": True}


class OptionError(ValueError):
    """An option out of its range, or a `--model` of the wrong kind; the message names the command-line flag."""


def flag(name: str) -> str:
    """The command-line spelling of the option `name` (a field of `FinetuneOptions`)."""
    return spelling(FIELDS[name]) if name in FIELDS else "--" + name.replace("_", "-")


def check_batch_size(value, flag: str = "--batch-size") -> None:
    """`OptionError` unless `value` is a positive integer."""
    problem = positive_integer(value)
    if problem:
        raise OptionError(f"{flag} {problem}")


_probability = must_be("a probability in [0, 1)", lambda value: is_number(value) and 0 <= value < 1)
_hidden_size_or_zero = must_be("0 (a linear classifier) or a positive integer",
                               lambda value: is_int(value) and value >= 0)
_steps_or_epochs = must_be("a positive integer (or -1: train for --epochs)",
                           lambda value: is_int(value) and (value >= 1 or value == -1))
_seed = must_be("an integer in [0, 2**32)", lambda value: is_int(value) and 0 <= value < 2**32)


class _Checked:
    """Every options dataclass's `__post_init__`: the fields' range checks (`Option.check`), switches True or False
    (or None where that means "decided from the data"), choices one of their `Literal`'s values; an `OptionError`
    naming each option out of range."""

    def __post_init__(self):
        found = problems(self)
        for name, hint in typing.get_type_hints(type(self)).items():
            value = getattr(self, name)
            if hint is bool or hint == bool | None:
                if not (isinstance(value, bool) or (value is None and hint is not bool)):
                    found.append(f"{flag(name)} must be True or False, got {value}")
            elif typing.get_origin(hint) is Literal and value not in typing.get_args(hint):
                choices = " or ".join(repr(choice) for choice in typing.get_args(hint))
                found.append(f"{flag(name)} must be {choices}, got {value}")
        if found:
            raise OptionError("; ".join(found))


@dataclass
class ModelArguments(_Checked):
    """The pretrained biLM and the head put on it (both commands)."""

    _argument_group_name = "the biLM and the head"

    model: str = option_field(
        "default", "pretrained ELMo folder or Hub name; 'default' (the default) is the Chinese model shipped with "
        "hf-elmo")
    freeze: bool = option_field(True, "keep the biLM fixed (default; --no-freeze fine-tunes it too)")
    random_init: bool = option_field(False, "same architecture, biLM randomly initialised (a baseline)")
    # The head's own trainable word vectors x_k beside the ELMo mix (the paper's [x_k; ELMo_k]).
    task_token_features: bool = option_field(
        False, "give the head its own trainable word vectors x_k (a character CNN started from the biLM's layer 0) "
        "and feed it [x_k; ELMo_k], as the paper adds ELMo to a task model", aliases=["--token-features"])
    dropout: Annotated[float | None, Option(check=optional(_probability))] = option_field(
        None, "dropout on the ELMo mix and in the head (default: 0.3 for train, 0.5 for train-classifier)")
    # With a frozen biLM its layers are computed once for the training and dev data, so each epoch
    # trains only the head (the paper's setting; same numbers as running the biLM every step).
    precompute_elmo: bool = option_field(
        True, "compute the frozen biLM's layers once (default; --no-precompute-elmo runs it at every step: less "
        "memory)")


@dataclass
class TaggerArguments(_Checked):
    """The tagger's head and labels (`train` only)."""

    _argument_group_name = "the tagger"

    task_encoder: Literal["linear", "bilstm"] = option_field("bilstm", "the task encoder over the ELMo mix")
    task_encoder_hidden_size: Annotated[int | None, Option(check=optional(positive_integer))] = option_field(
        None, "task BiLSTM size per direction (default 200)", aliases=["--hidden-size"])
    use_crf: bool = option_field(False, "CRF layer with Viterbi decoding")
    # Character-labelled data read as words by the biLM (config.label_characters); None: decided from the data.
    label_characters: bool | None = option_field(
        None, "the file labels single characters (MSRA, most Chinese NER sets): the biLM reads the jieba words they "
        "form and each character gets its word's vectors plus its place in the word (S/B/M/E); tags stay per "
        "character. Default: on when 90%% of the training tokens are one character each (of any script: letters, "
        "digits, punctuation and emoji count) and the model reads jieba words", **_SWITCH)
    # With label_characters and task_token_features: x_k of each character alone too; None: on whenever both are.
    task_character_features: bool | None = option_field(
        None, "with --label-characters and --token-features: each character also gets the head's own vector x_k of "
        "the character alone (the characters of one jieba word otherwise share the word's vectors). Default: on "
        "whenever both are", aliases=["--character-features"], **_SWITCH)
    unseen_label: Literal["error", "O"] = option_field("error", "dev/test labels unseen in training")


@dataclass
class ClassifierArguments(_Checked):
    """The sentence classifier's head (`train-classifier` only)."""

    _argument_group_name = "the sentence classifier"

    classifier_hidden_size: Annotated[int | None, Option(check=optional(_hidden_size_or_zero))] = option_field(
        None, "MLP hidden size (0 = linear)")


@dataclass
class DataArguments(_Checked):
    """How the examples are read."""

    _argument_group_name = "reading the examples"

    max_words: Annotated[int | None, Option(check=optional(positive_integer))] = option_field(
        None, "cut training sentences to this many words")


@dataclass
class TrainingOptions(_Checked):
    """The training knobs: `transformers.TrainingArguments` fields of the same names, with hf-elmo's defaults."""

    _argument_group_name = "training"

    num_train_epochs: Annotated[float | None, Option(check=optional(positive_number))] = option_field(
        None, "passes over the training data (> 0; default: 10 for train, 3 for train-classifier)",
        aliases=["--epochs"])
    max_steps: Annotated[int, Option(check=_steps_or_epochs)] = option_field(
        -1, "stop after this many optimiser steps (overrides --epochs; -1, the default, = use --epochs)")
    learning_rate: Annotated[float | None, Option(check=optional(positive_number))] = option_field(
        None, "learning rate (AdamW, linear decay; default: 5e-3 for train with the biLM frozen, otherwise 1e-3)",
        aliases=["--lr"])
    weight_decay: Annotated[float, Option(check=non_negative)] = option_field(0.0, "AdamW weight decay")
    per_device_train_batch_size: Annotated[int, Option(check=positive_integer)] = option_field(
        32, "sentences per training step", aliases=["--batch-size"])
    per_device_eval_batch_size: Annotated[int, Option(check=positive_integer)] = option_field(
        64, "sentences per evaluation batch", aliases=["--eval-batch-size"])
    gradient_accumulation_steps: Annotated[int, Option(check=positive_integer)] = option_field(
        1, "gradient accumulation steps", aliases=["--grad-accum"])
    seed: Annotated[int, Option(check=_seed)] = option_field(42, "initialisation and data order")
    load_best_model_at_end: bool = option_field(
        True, "keep the model of the best epoch on dev (default; --no-select-best keeps the last epoch's)",
        aliases=["--select-best"])


@dataclass
class RunArguments(_Checked):
    """Where and how the run writes: the options a killed run may be resumed with changed (not its identity)."""

    _argument_group_name = "output"

    # None (the library only): the model is kept in memory, nothing is written.
    output_dir: str | None = option_field(None, "folder to write the fine-tuned model into", aliases=["--output"],
                                          required=True)
    overwrite: bool = option_field(False, "replace an existing output folder")
    threads: Annotated[int | None, Option(check=optional(positive_integer))] = option_field(None, "torch CPU threads")
    logging_steps: Annotated[int, Option(check=positive_integer)] = option_field(
        50, "log the loss every this many steps")


@dataclass
class FinetuneOptions(RunArguments, TrainingOptions, DataArguments, ClassifierArguments, TaggerArguments,
                      ModelArguments):
    """Options of `train_tagger` / `train_classifier`: every role's options in one object (a role's options the
    task does not use keep their defaults)."""

    head_config: dict = option_field({}, "further config values of the head (Python only)")

    def __post_init__(self):
        super().__post_init__()
        if self.task_character_features is True and (not self.task_token_features or self.label_characters is False):
            raise OptionError("--character-features gives each character the head's own vector x_k of its words: it "
                              "needs --token-features and character-labelled data (not --no-label-characters)")

    def check(self) -> None:
        """Raise `OptionError` for an output folder that cannot be written (the ranges are checked when the options
        are made); run before any work."""
        if self.output_dir:
            _check_output_dir(self)


def _check_output_dir(options: FinetuneOptions) -> None:
    """The output folder: not the --model it reads (nor around or inside it), a new one unless --overwrite, and
    one whose parent takes new files (it is built beside its final place)."""
    from pathlib import Path

    from ..loading import resolve_model_name
    from ..utils.io import check_output_folder, refuse_output_over_inputs

    if isinstance(options.model, (str, os.PathLike)):  # (a model object passed to the library is no path)
        refuse_output_over_inputs(options.output_dir, "--output-dir",
                                  [("the model folder", "--model", resolve_model_name(options.model))])
    if os.path.exists(options.output_dir):
        if not os.path.isdir(options.output_dir):
            raise OptionError(f"--output-dir {options.output_dir} is a file, not a folder")
        if not options.overwrite:  # an unfinished run keeps its checkpoints beside the folder, not in it
            raise OptionError(f"{options.output_dir} already exists (pass --overwrite to replace it)")
    try:
        check_output_folder(Path(options.output_dir).resolve().parent, "--output-dir's parent")
    except ValueError as error:
        raise OptionError(f"--output-dir {options.output_dir}: {error}") from None


FIELDS = {item.name: item for item in fields(FinetuneOptions)}


def run_identity_names() -> tuple[str, ...]:
    """The options that define a run: a killed run is resumed only with the same values."""
    outside = {item.name for item in fields(RunArguments)}
    return tuple(name for name in FIELDS if name not in outside)


# Run-identity options newer than some recorded runs, with the value those runs had (none yet: the record has held
# the same options since it became one flat record of them).
OPTIONS_ADDED_LATER = added_later(FinetuneOptions)


@dataclass
class DataFiles:
    """Where the examples come from (command line only: the library takes the examples themselves)."""

    _argument_group_name = "data"

    train: str | None = option_field(None, "training file: CoNLL-style (word<TAB>tag) or .jsonl; for "
                                     "train-classifier, label<TAB>text lines (this or --dataset is required)")
    dev: str | None = option_field(None, "development file (model selection on it)")
    test: str | None = option_field(None, "test file (scored once at the end)")


@dataclass
class HubDataset:
    """A `datasets` dataset instead of --train/--dev/--test files (`train` only)."""

    _argument_group_name = "a datasets dataset instead of files"

    dataset: str | None = option_field(None, "a `datasets` dataset (local path or cached name) with "
                                       "train/validation/test, instead of --train")
    dataset_config: str | None = option_field(None, "the --dataset's configuration name")
    words_column: str = option_field("tokens", "the --dataset's column of words")
    tags_column: str = option_field("ner_tags", "the --dataset's column of tags")


# The options of each sub-command, in the order --help lists them.
COMMAND_OPTIONS = {
    "train": (DataFiles, HubDataset, ModelArguments, TaggerArguments, DataArguments, TrainingOptions, RunArguments),
    "train-classifier": (DataFiles, ModelArguments, ClassifierArguments, DataArguments, TrainingOptions,
                         RunArguments),
}


__all__ = ["COMMAND_OPTIONS", "OPTIONS_ADDED_LATER", "ClassifierArguments", "DataArguments", "DataFiles",
           "FinetuneOptions", "HubDataset", "ModelArguments", "OptionError", "RunArguments", "TaggerArguments",
           "TrainingOptions", "check_batch_size", "flag", "run_identity_names"]
