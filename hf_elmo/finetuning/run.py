"""Fine-tune ELMo on word-level tagging (NER, POS, ...) or sentence classification with the `Trainer`.

Command line (``python -m hf_elmo.cli finetune``; also ``hf-elmo finetune``)::

    # train: CoNLL-style files (word<TAB>tag or word<space>tag per line, blank line between sentences)
    python -m hf_elmo.cli finetune train --model default \\
        --train train.txt --dev dev.txt --test test.txt --output-dir runs/ner \\
        --task-encoder bilstm --use-crf --epochs 5
    # tag raw text (Chinese is segmented by the tokenizer) -> JSON lines with entity spans
    python -m hf_elmo.cli finetune predict --model runs/ner "王小明在北京工作。"
    # a classifier's labels and scores, the same way
    python -m hf_elmo.cli finetune predict --model runs/cls "质量很好，物流也快"
    # score a saved tagger on a labelled file
    python -m hf_elmo.cli finetune evaluate --model runs/ner --test test.txt
    # sentence classification: label<TAB>text per line
    python -m hf_elmo.cli finetune train-classifier --model default --train train.tsv --output-dir runs/cls

Input rules (bad input stops with an error naming file and line) are in `hf_elmo.finetuning.conll`: CoNLL lines
``word<TAB>tag`` or ``word tag`` (first and last column), blank line between sentences, ``.jsonl`` with
``words``/``tags``. A dev/test label unseen in training is an error unless ``--unseen-label O`` (map it to
``O`` with a warning). Tags (BIO/IOB1/BIOES) are scored with seqeval (conlleval rules): overall micro
precision / recall / F1 and the same per entity type.

``train-classifier`` reads ``label<TAB>text`` lines. It refuses training data with a single label, and data
of 20 or more examples with more distinct labels than half the examples or than distinct texts (fewer than two
examples per label on average; typically a ``word<TAB>tag`` CoNLL file, whose words would become the classes):
such a file is meant for ``train``.

``predict`` prints one JSON object per input line, in input order: a tagger's words, tags and entities, or a
classifier's label, its probability and every label's; a blank line gets an empty result (no words), so output
line N always belongs to input line N. ``predict`` takes a folder written by ``train`` or ``train-classifier``,
``evaluate`` one written by ``train`` (a fine-tuned tagger); a pretrained biLM is refused. Numeric options are
checked before any model is loaded; every problem ends in one ``error: ...`` line and exit status 2.

The output folder holds the model and tokenizer (``from_pretrained`` loads it; ``pipeline(
"elmo-token-classification", model=folder)`` tags text) plus ``results.json`` with the metrics.
It is written atomically: a failed run leaves no half-written folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch

from ..loading import ModelNotFoundError, check_model_location, load_tokenizer, resolve_model_name
from ..models.elmo.bilm_elmo import weight_problems
from ..models.elmo.configuration_elmo import ElmoConfig
from ..models.elmo.modeling_elmo import (
    ElmoForCharacterTagging,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
)
from ..utils.checkpoints import (  # noqa: F401  (checkpoint_folder_for: re-exported)
    RUN_IDENTITY_FILE,
    RunFolderError,
    check_checkpoint_readable,
    check_same_run,
    checkpoint_folder_for,
    cleanup_after_full_disk,
    create_run_folder,
    last_complete_checkpoint,
    read_run_identity,
)
from ..utils.io import AtomicDirectory, DiskFullError, output_lock
from .character_words import character_labelled_decision
from .collator import ElmoDataCollator
from .conll import (  # noqa: F401  (re-exported: the data half of the fine-tuning API)
    DataError,
    TaggedSentence,
    check_classification_labels,
    check_tagging_labels,
    encode_tags,
    label_list,
    load_hub_dataset,
    read_classification_file,
    read_conll,
    read_jsonl,
    read_text_lines,
    sentences_from_dataset,
    sentences_from_pairs,
)
from .metrics import seqeval_scores, tag_metrics_function  # noqa: F401  (re-exported)
from .options import (  # noqa: F401  (re-exported: the options are part of the fine-tuning API)
    OPTIONS_ADDED_LATER,
    FinetuneOptions,
    OptionError,
    check_batch_size,
    flag,
    run_identity_names,
)
from .precomputed_layers import precompute_elmo_layers  # noqa: F401  (re-exported)
from .predict import character_example, tag, tagging_collator

logger = logging.getLogger("hf_elmo.finetuning.run")

class ListDataset(torch.utils.data.Dataset):
    def __init__(self, items: Sequence[dict]):
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


def predict_tags(
    model, tokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64, max_words: int | None = None
) -> list[list[str]]:
    """Tags for pre-split sentences, in input order (`hf_elmo.finetuning.predict.tag` without scores or entities)."""
    check_batch_size(batch_size, "batch_size")
    results = tag(model, tokenizer, [list(sentence) for sentence in sentences], is_split_into_words=True,
                  batch_size=batch_size, with_scores=False, max_words=max_words)
    return [result["tags"] for result in results]


def evaluate_tagger(
    model, tokenizer, sentences: Sequence[TaggedSentence], batch_size: int = 64, unseen_label: str = "error"
) -> dict[str, float]:
    """seqeval scores of a tagger on labelled sentences (labels checked against the model's label set)."""
    label2id = {label: int(i) for label, i in model.config.label2id.items()}
    encoded = encode_tags(sentences, label2id, unseen_label, "evaluation")
    id2label = model.config.id2label
    gold = [[id2label[i] for i in example["labels"]] for example in encoded]
    predicted = predict_tags(model, tokenizer, [s.words for s in sentences], batch_size)
    return seqeval_scores(gold, predicted)


# Training ------------------------------------------------------------------------------------


# What `num_train_epochs`, `learning_rate` and `dropout` left as None mean, per task; the rate by whether the biLM is
# frozen.
# A frozen biLM leaves a small head to train, which wants a larger step and, on a small training set, more passes
# than 3; taggers also did better on dev with less dropout (benchmarks/NER_EXPERIMENTS.md, "The tagger's defaults
# on small training sets"). The classifier keeps the values its measurements were made with (dropout None: the
# model config's classifier_dropout, 0.5 unless the base model says otherwise).
TASK_DEFAULTS = {
    "token-classification": {"num_train_epochs": 10.0, "learning_rate": {True: 5e-3, False: 1e-3}, "dropout": 0.3},
    "sequence-classification": {"num_train_epochs": 3.0, "learning_rate": {True: 1e-3, False: 1e-3}, "dropout": None},
}


def _head_config(options: FinetuneOptions, extra: dict) -> dict:
    values = dict(extra)
    values["freeze_elmo"] = options.freeze
    values["task_token_features"] = options.task_token_features
    if options.dropout is not None:
        values["classifier_dropout"] = options.dropout
    if options.classifier_hidden_size is not None:
        values["classifier_hidden_size"] = options.classifier_hidden_size
    values.update(options.head_config)
    return values


# Models --------------------------------------------------------------------------------------

# What `config.architectures` says a fine-tuned folder holds.
_HEADS = {"ElmoForTokenClassification": "tagger", "ElmoForCharacterTagging": "tagger",
          "ElmoForSequenceClassification": "sentence classifier"}
_COMMANDS = {"ElmoForTokenClassification": "train", "ElmoForCharacterTagging": "train",
             "ElmoForSequenceClassification": "train-classifier"}
# The heads `hf-elmo finetune train` writes.
TAGGERS = (ElmoForTokenClassification, ElmoForCharacterTagging)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def model_config_dict(name: str | os.PathLike) -> dict:
    """The config.json of a model folder or Hub id, read without loading weights.

    Raises `ModelNotFoundError` (one line) when `name` leads to no ELMo config: a missing folder, a folder
    without config.json, or a name that is no local folder and that the Hub cannot provide (offline,
    unreachable, or no such model).
    """
    name = os.fspath(name)
    hub_kwargs = check_model_location(name)
    try:
        config_dict, _ = ElmoConfig.get_config_dict(name, **hub_kwargs)
    except (OSError, ValueError) as error:
        if os.path.isdir(name):
            raise ModelNotFoundError(f"cannot load the model in {name}: {_first_line(error)}") from None
        raise ModelNotFoundError(
            f"there is no local folder {name!r}, and the Hugging Face Hub could not provide a model of that name "
            f"(offline, unreachable, or no such model): {_first_line(error)}"
        ) from None
    return config_dict


def _architectures(config_dict: dict) -> list[str]:
    architectures = config_dict.get("architectures") or []
    return [name for name in architectures if isinstance(name, str)]


def _check_training_base(name: str, model_class) -> list[str]:
    """Refuse a `--model` that is a fine-tuned head of the other kind; returns the folder's architectures."""
    architectures = _architectures(model_config_dict(name))
    for other, kind in _HEADS.items():
        if other in architectures and other != model_class.__name__:
            command = _COMMANDS[model_class.__name__]
            raise OptionError(
                f"--model {name} is a fine-tuned {kind} ({other}); `hf-elmo finetune {command}` starts from a "
                "pretrained biLM: pass the pretrained biLM folder or Hub name instead"
            )
    return architectures


def build_model(model_class, options: FinetuneOptions, **config_values):
    """The head on top of `options.model`: pretrained biLM, or (with `random_init`) the same architecture fresh.

    `options.model` must be a pretrained biLM (or a fine-tuned model of the same kind whose head fits);
    anything else raises `ModelNotFoundError` or `OptionError` with a one-line reason.
    """
    architectures = _check_training_base(options.model, model_class)
    hub_kwargs = check_model_location(options.model)
    if options.random_init:
        config = ElmoConfig.from_pretrained(options.model, **hub_kwargs)
        for key, value in config_values.items():
            setattr(config, key, value)
        config.check_values()
        return model_class(config)
    # transformers' load report lists the head's weights as MISSING in a warning table; here they are new by
    # design, so that one record is dropped and the lines below say what matters (a filter on the logger that
    # writes it, added for this call only: its other warnings and every logging level stay as they are).
    report_logger = logging.getLogger("transformers.modeling_utils")
    load_report = _DropLoadReport()
    report_logger.addFilter(load_report)
    try:
        model, loading = model_class.from_pretrained(
            options.model, output_loading_info=True, **hub_kwargs, **config_values
        )
    except (OSError, ValueError, RuntimeError) as error:
        if isinstance(error, RuntimeError):  # transformers' size mismatch: weights shaped for another head
            kind = next((_HEADS[a] for a in architectures if a in _HEADS), None)
            if kind is not None:
                raise OptionError(
                    f"--model {options.model} is a fine-tuned {kind} whose head does not fit this run (other "
                    "labels or head options); start from the pretrained biLM it was trained from instead"
                ) from None
        raise ModelNotFoundError(f"cannot load the model in {options.model}: {_first_line(error)}") from None
    finally:
        report_logger.removeFilter(load_report)
    problem = weight_problems(model, loading, options.model)
    if problem:
        raise ModelNotFoundError(f"cannot load the model in {options.model}: {problem}")
    fresh = sorted({name.split(".")[0] for name in loading["missing_keys"] if not name.startswith("elmo.")})
    if fresh:
        logger.info("new %s weights, not in %s: %s", model_class.__name__, options.model, ", ".join(fresh))
    return model


class _DropLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


# What `hf-elmo finetune predict` and `evaluate` take, and the command that writes it.
_TAKES = {"predict": "the --output-dir of `hf-elmo finetune train` or `train-classifier`",
          "evaluate": "the --output-dir of `hf-elmo finetune train`"}


def load_finetuned(name: str | os.PathLike, model_classes: tuple = TAGGERS, command: str = "evaluate",
                   user_dict: str | os.PathLike | None = None):
    """A fine-tuned model of one of `model_classes` (the first when config.json names none) and its tokenizer (with
    the jieba user dictionary `user_dict`, if given), from a folder (or Hub id) written by `train_tagger` /
    `train_classifier`.

    Refuses, with a one-line `OptionError`, anything else: a pretrained biLM (`ElmoModel`, `ElmoForPreTraining`), a
    head of another kind, or a folder whose weights hold no head. `command` names what takes the folder.
    """
    name = os.fspath(name)
    architectures = _architectures(model_config_dict(name))
    kinds = " or ".join(dict.fromkeys(_HEADS[model_class.__name__] for model_class in model_classes))
    takes = f"{command} takes {_TAKES[command]}"
    model_class = next((c for c in model_classes if c.__name__ in architectures), None)
    if model_class is None and architectures:
        kind = next((_HEADS[a] for a in architectures if a in _HEADS), None)
        what = f"a fine-tuned {kind}" if kind else "a pretrained biLM"
        raise OptionError(f"--model {name} is {what} ({', '.join(architectures)}), not a fine-tuned {kinds}: {takes}")
    model_class = model_class or model_classes[0]
    hub_kwargs = check_model_location(name)
    try:
        model, loading_info = model_class.from_pretrained(name, output_loading_info=True, **hub_kwargs)
    except (OSError, ValueError) as error:
        raise ModelNotFoundError(f"cannot load a {_HEADS[model_class.__name__]} from {name}: "
                                 f"{_first_line(error)}") from None
    missing = list(loading_info.get("missing_keys") or [])
    if missing:
        head = [key for key in missing if not key.startswith("elmo.")]
        shown = ", ".join(sorted(head or missing)[:3]) + (", ..." if len(head or missing) > 3 else "")
        if head:
            raise OptionError(f"--model {name} is not a fine-tuned {kinds}: its weights hold no "
                              f"{_HEADS[model_class.__name__]} head (missing {shown}); {takes}")
        raise ModelNotFoundError(f"{name}: its weights lack {len(missing)} tensors of the model ({shown})")
    labels = [str(label) for label in model.config.id2label.values()]
    if all(re.fullmatch(r"LABEL_\d+", label) for label in labels):
        logger.warning("%s: the labels are transformers' defaults (%s): was it saved without its label names?",
                       name, ", ".join(labels))
    return model, load_tokenizer(name, model.config, hub_kwargs, user_dict)


def load_tagger(name: str | os.PathLike):
    """A fine-tuned tagger and its tokenizer from a folder (or Hub id) written by `train_tagger` (`load_finetuned`)."""
    return load_finetuned(name, TAGGERS)


@torch.no_grad()
def classify(model, tokenizer, inputs: Sequence[str] | Sequence[Sequence[str]], is_split_into_words: bool = False,
             batch_size: int = 32) -> list[dict]:
    """`{"text", "words", "label", "score", "scores"}` per input of a fine-tuned sentence classifier: the most
    probable label, its probability and every label's. An input without words gets `label` and `score` None and
    no scores, so that results line up with inputs."""
    check_batch_size(batch_size, "batch_size")
    sentences = [list(item) if is_split_into_words else tokenizer.tokenize(item) for item in inputs]
    collator = ElmoDataCollator(tokenizer)
    id2label = model.config.id2label
    results = [{"text": None if is_split_into_words else text, "words": words, "label": None, "score": None,
                "scores": {}} for text, words in zip(inputs, sentences)]
    with_words = [index for index, words in enumerate(sentences) if words]
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        for begin in range(0, len(with_words), batch_size):
            chunk = with_words[begin : begin + batch_size]
            batch = collator([{"words": sentences[index]} for index in chunk])
            logits = model(**{key: value.to(device) for key, value in batch.items()}).logits
            for row, probabilities in zip(chunk, logits.float().softmax(-1).cpu().tolist()):
                best = max(range(len(probabilities)), key=probabilities.__getitem__)
                results[row].update(label=id2label[best], score=probabilities[best],
                                    scores={id2label[i]: p for i, p in enumerate(probabilities)})
    finally:
        model.train(was_training)
    return results


def _maybe_precompute(model, collator, options: FinetuneOptions, *example_lists):
    """`precompute_elmo_layers` for each list when the biLM is frozen and `options.precompute_elmo` is on."""
    if not (options.precompute_elmo and model.config.freeze_elmo):
        return example_lists
    started = time.time()
    computed = tuple(
        precompute_elmo_layers(
            model.elmo, collator, examples, options.per_device_eval_batch_size,
            keep_input_ids=model.config.task_token_features,
        )
        if examples
        else examples
        for examples in example_lists
    )
    logger.info("biLM layers of %d examples precomputed in %.1f s", sum(len(e or []) for e in example_lists),
                time.time() - started)
    return computed


def _training_arguments(options: FinetuneOptions, checkpoint_dir: str, has_dev: bool, metric: str):
    """The run's `TrainingArguments`: every option that is one of its fields, by name; the rest fixed by how hf-elmo
    fine-tunes."""
    from transformers import TrainingArguments

    theirs = {item.name for item in fields(TrainingArguments)}
    knobs = {item.name: getattr(options, item.name) for item in fields(options) if item.name in theirs}
    select_best = options.load_best_model_at_end and has_dev
    return TrainingArguments(**{
        **knobs,
        "output_dir": checkpoint_dir,
        "load_best_model_at_end": select_best,
        "metric_for_best_model": metric if select_best else None,
        "greater_is_better": True,
        "data_seed": options.seed,
        "eval_strategy": "epoch" if has_dev else "no",
        "save_strategy": "epoch",  # with the optimizer and RNG states: a killed run resumes from its last epoch
        "save_total_limit": 1,  # with load_best_model_at_end, Trainer also keeps the best
        "report_to": "none",
        "remove_unused_columns": False,
        "dataloader_num_workers": 0,
        "dataloader_pin_memory": torch.cuda.is_available(),  # pinning is for copies to a GPU
        "disable_tqdm": True,
    })


def run_identity(options: FinetuneOptions, *datasets) -> dict:
    """What defines a fine-tuning run: its options (not where it writes or how often it logs) and a digest of
    its data. A checkpoint folder is resumed only by a run with the same identity."""
    rows = [
        [[item.words, item.tags] if isinstance(item, TaggedSentence) else [item[0] if isinstance(item[0], str)
         else list(item[0]), item[1]] for item in data or []]
        for data in datasets
    ]
    digest = hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()
    return {**{name: getattr(options, name) for name in run_identity_names()}, DATA_DIGEST: digest}


# The run identity's digest of the training and dev data, beside the options.
DATA_DIGEST = "data_sha256"


def _spelled(name: str) -> str:
    return "the training or dev data" if name == DATA_DIGEST else flag(name)


@contextlib.contextmanager
def _checkpoints(options: FinetuneOptions, identity: dict):
    """Yields (folder for Trainer's checkpoints, checkpoint to resume from or None). With an output folder the
    checkpoints live beside it under a fixed name, so the same command run again after a kill resumes; the folder
    is created with the run's identity in it, held by this run alone, and removed once the output is written.
    Without an output folder, a temporary folder."""
    if not options.output_dir:
        with tempfile.TemporaryDirectory(prefix="hf-elmo-finetune-") as folder:
            yield folder, None
        return
    folder = checkpoint_folder_for(options.output_dir)
    with output_lock(options.output_dir):  # the command's own lock: one run writes the output and its checkpoints
        create_run_folder(folder, identity)
        recorded = read_run_identity(folder)
        if recorded is None:
            raise RunFolderError(f"{folder} holds checkpoints without the record of their run ({RUN_IDENTITY_FILE}): "
                                 "delete that folder to start over")
        check_same_run(folder, recorded, identity, _spelled, OPTIONS_ADDED_LATER)
        resume = last_complete_checkpoint(folder)
        if resume:
            check_checkpoint_readable(resume, f"delete {resume} to resume from an earlier epoch, or {folder} to "
                                      "start over")
        logger.info("%s; checkpoints are written to %s at the end of each epoch, and Ctrl-C saves one before it stops",
                    f"resuming from {resume}" if resume else "starting a new run", folder)
        try:
            yield str(folder), resume
        except Exception as error:
            cleaned = cleanup_after_full_disk(error, folder)
            if cleaned is None:
                raise
            resume = cleaned[1]
            raise DiskFullError(
                f"the disk holding {options.output_dir} is full; nothing was written to it. Free some space and run "
                f"the same command again: it resumes from "
                f"{Path(resume).name + ' in ' + str(folder) if resume else 'the beginning'}"
            ) from None
        shutil.rmtree(folder, ignore_errors=True)


def save_folder(model, tokenizer, output_dir: str, results: dict, overwrite: bool = False) -> Path:
    """Model + tokenizer + results.json, written atomically."""
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(output_dir)


def _start_training(options: FinetuneOptions | None, task: str) -> FinetuneOptions:
    """What `train_tagger` and `train_classifier` do first: check the options and the output folder, fill in the
    task's defaults, name the shipped model for `"default"`, set the thread count and the seed. Returns the
    options to train with."""
    from transformers import set_seed
    options = options or FinetuneOptions()  # (its ranges were checked when it was made)
    options.check()
    defaults = TASK_DEFAULTS[task]
    learning_rate = defaults["learning_rate"][options.freeze] if options.learning_rate is None else options.learning_rate
    options = replace(
        options,
        model=resolve_model_name(options.model),
        num_train_epochs=defaults["num_train_epochs"] if options.num_train_epochs is None else options.num_train_epochs,
        learning_rate=learning_rate,
        dropout=defaults["dropout"] if options.dropout is None else options.dropout,
    )
    if options.threads:
        torch.set_num_threads(options.threads)
    set_seed(options.seed)  # before the head's weights are drawn
    return options


@contextlib.contextmanager
def _trained(options: FinetuneOptions, data: tuple, labels: list[str], model, train_dataset, eval_dataset, collator,
             metrics, metric: str):
    """Train `model` with `Trainer`, resuming a killed run of the same command; yields (trainer, the results
    both heads report). The caller evaluates and saves inside the block, before the checkpoints are removed."""
    from transformers import Trainer

    from ..utils.interruption import SaveOnInterrupt

    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info("labels %s; %d trainable of %d parameters", labels, trainable,
                sum(p.numel() for p in model.parameters()))
    started = time.time()
    with _checkpoints(options, run_identity(options, *data)) as (checkpoint_dir, resume):
        interruption = SaveOnInterrupt("fine-tuning")
        trainer = Trainer(
            model=model,
            args=_training_arguments(options, checkpoint_dir, eval_dataset is not None, metric),
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            data_collator=collator,
            compute_metrics=metrics,
            callbacks=[interruption],
        )
        output = trainer.train(resume_from_checkpoint=resume)
        interruption.raise_if_interrupted(checkpoint_dir)  # the checkpoints are kept: the same command resumes
        yield trainer, {
            "labels": labels,
            "trainable_parameters": trainable,
            "train_seconds": round(time.time() - started, 1),
            "train_loss": float(output.training_loss),
            "resumed_from": Path(resume).name if resume else None,
            "options": {k: v for k, v in asdict(options).items() if k not in ("output_dir", "overwrite")},
        }


def _refuse_character_features(options: FinetuneOptions, reason: str) -> None:
    """Refuse --character-features, which needs characters read as jieba words, when they will not be."""
    if options.task_character_features:
        raise OptionError(f"--character-features is for character-labelled data read as jieba words, but {reason}")


def _new_tagger(options: FinetuneOptions, label2id: dict[str, int], train: Sequence[TaggedSentence]):
    """The tagger to train and its tokenizer: an `ElmoForCharacterTagging` for character-labelled data read as jieba
    words (the option, else the data's look), else an `ElmoForTokenClassification`."""
    head = {"task_encoder": options.task_encoder, "use_crf": options.use_crf}
    if options.task_encoder_hidden_size is not None:
        head["task_encoder_hidden_size"] = options.task_encoder_hidden_size

    def tagger(label_characters: bool):
        wanted = options.task_character_features
        character_features = bool(label_characters) and (options.task_token_features if wanted is None else wanted)
        model_class = ElmoForCharacterTagging if label_characters else ElmoForTokenClassification
        return build_model(model_class, options, num_labels=len(label2id),
                           id2label={i: label for label, i in label2id.items()}, label2id=label2id,
                           **_head_config(options, {**head, "task_character_features": character_features}))

    label_characters = options.label_characters
    if label_characters is None:
        label_characters, why = character_labelled_decision(train)
        logger.info(why)
        if not label_characters:
            _refuse_character_features(options, why)
    model = tagger(label_characters)
    tokenizer = load_tokenizer(options.model, model.config)
    if model.labels_characters and tokenizer.segmenter != "jieba":
        if options.label_characters:
            raise OptionError(
                f"--label-characters groups the characters into the words the biLM read in pretraining, but "
                f"{options.model} reads {tokenizer.segmenter!r} tokens, not jieba words: pass --no-label-characters"
            )
        _refuse_character_features(options, f"{options.model} reads {tokenizer.segmenter!r} tokens, not jieba words")
        model = tagger(False)  # a biLM of characters reads character-labelled data as it is
        logger.info("%s reads %r tokens, not jieba words: it reads each character as it is", options.model,
                    tokenizer.segmenter)
    if model.labels_characters:
        logger.info("characters labelled: the biLM reads the jieba words they form (--no-label-characters: "
                    "one character a word)")
    return model, tokenizer


def train_tagger(
    train: Sequence[TaggedSentence],
    dev: Sequence[TaggedSentence] | None = None,
    test: Sequence[TaggedSentence] | None = None,
    options: FinetuneOptions | None = None,
) -> dict:
    """Fine-tune an [`ElmoForTokenClassification`]; returns `{"model", "tokenizer", "results"}`.

    `results` holds the label list, dev / test seqeval scores (`dev`, `test`), training time and the options.
    With `options.output_dir` the folder is written (model, tokenizer, results.json).
    """
    options = _start_training(options, "token-classification")
    if not train:
        raise DataError("no training sentences")
    check_tagging_labels(train)
    label2id = {label: i for i, label in enumerate(label_list(train))}
    model, tokenizer = _new_tagger(options, label2id, train)
    collator = tagging_collator(model, tokenizer, options.max_words)
    started = time.time()

    def examples(sentences, unseen_label: str, split: str) -> list[dict]:
        encoded = encode_tags(sentences, label2id, unseen_label, split)
        if not model.labels_characters:
            return encoded
        return [character_example(example, model.config) for example in encoded]

    train_examples, dev_examples = _maybe_precompute(
        model, collator, options, examples(train, "error", "train"),
        examples(dev, options.unseen_label, "dev") if dev else None,
    )
    precompute_seconds = round(time.time() - started, 1)
    with _trained(options, (train, dev), list(label2id), model, ListDataset(train_examples),
                  ListDataset(dev_examples) if dev_examples else None, collator,
                  tag_metrics_function(model.config.id2label), "f1") as (trainer, results):
        model = trainer.model
        results = {"task": "token-classification", "train_sentences": len(train),
                   "precompute_seconds": precompute_seconds, **results}
        for split, sentences in (("dev", dev), ("test", test)):
            if sentences:
                results[split] = evaluate_tagger(model, tokenizer, sentences, options.per_device_eval_batch_size,
                                                 options.unseen_label)
        if options.output_dir:
            save_folder(model, tokenizer, options.output_dir, results, options.overwrite)
    return {"model": model, "tokenizer": tokenizer, "results": results}


def train_classifier(
    train: Sequence[tuple[str | Sequence[str], str]],
    dev: Sequence[tuple[str | Sequence[str], str]] | None = None,
    test: Sequence[tuple[str | Sequence[str], str]] | None = None,
    options: FinetuneOptions | None = None,
) -> dict:
    """Fine-tune an [`ElmoForSequenceClassification`] on (text or word list, label) pairs.

    Returns `{"model", "tokenizer", "results"}`; `results["dev"/"test"]["accuracy"]`.
    The training pairs are checked with [`check_classification_labels`] first.
    """
    options = _start_training(options, "sequence-classification")
    if not train:
        raise DataError("no training examples")
    check_classification_labels(train)
    labels = sorted({label for _, label in train})
    label2id = {label: i for i, label in enumerate(labels)}
    model = build_model(ElmoForSequenceClassification, options, num_labels=len(labels),
                        id2label=dict(enumerate(labels)), label2id=label2id, **_head_config(options, {}))
    tokenizer = load_tokenizer(options.model, model.config)
    collator = ElmoDataCollator(tokenizer, max_words=options.max_words)

    def examples_for(pairs, split):
        examples = []
        for index, (text, label) in enumerate(pairs):
            if label not in label2id:
                raise DataError(f"{split}: example {index + 1} has label {label!r}, unseen in training (known: {labels})")
            words = tokenizer.tokenize(text) if isinstance(text, str) else list(text)  # as the collator would
            examples.append({"words": words, "labels": label2id[label]})
        (computed,) = _maybe_precompute(model, collator, options, examples)
        return ListDataset(computed)

    with _trained(options, (train, dev), labels, model, examples_for(train, "train"),
                  examples_for(dev, "dev") if dev else None, collator, classification_accuracy,
                  "accuracy") as (trainer, results):
        results = {"task": "sequence-classification", "train_examples": len(train), **results}
        for split, pairs in (("dev", dev), ("test", test)):
            if pairs:
                metrics = trainer.evaluate(examples_for(pairs, split), metric_key_prefix=split)
                results[split] = {"accuracy": metrics[f"{split}_accuracy"], "loss": metrics[f"{split}_loss"]}
        model = trainer.model
        if options.output_dir:
            save_folder(model, tokenizer, options.output_dir, results, options.overwrite)
    return {"model": model, "tokenizer": tokenizer, "results": results}


def classification_accuracy(eval_prediction) -> dict[str, float]:
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, (tuple, list)) else logits
    return {"accuracy": float((logits.argmax(-1) == eval_prediction.label_ids).mean())}


