"""Fine-tune ELMo on word-level tagging (NER, POS, ...) or sentence classification with the `Trainer`.

Command line (``python -m hf_elmo.finetune``; also ``hf-elmo finetune``)::

    # train: CoNLL-style files (word<TAB>tag or word<space>tag per line, blank line between sentences)
    python -m hf_elmo.finetune train --model hf_elmo/pretrained/elmo-zh-small \\
        --train train.txt --dev dev.txt --test test.txt --output-dir runs/ner \\
        --task-encoder bilstm --use-crf --epochs 5
    # tag raw text (Chinese is segmented by the tokenizer) -> JSON lines with entity spans
    python -m hf_elmo.finetune predict --model runs/ner "张三在北京工作。"
    # score a saved tagger on a labelled file
    python -m hf_elmo.finetune evaluate --model runs/ner --test test.txt
    # sentence classification: label<TAB>text per line
    python -m hf_elmo.finetune train-classifier --model ... --train train.tsv --output-dir runs/cls

Input rules (bad input stops with an error naming file and line) are in `hf_elmo.conll`: CoNLL lines
``word<TAB>tag`` or ``word tag`` (first and last column), blank line between sentences, ``.jsonl`` with
``words``/``tags``. A dev/test label unseen in training is an error unless ``--unseen-label O`` (map it to
``O`` with a warning). Tags (BIO/IOB1/BIOES) are scored with seqeval (conlleval rules): overall micro
precision / recall / F1 and the same per entity type.

The output folder holds the model and tokenizer (``from_pretrained`` loads it; ``pipeline(
"elmo-token-classification", model=folder)`` tags text) plus ``results.json`` with the metrics.
It is written atomically: a failed run leaves no half-written folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .bilm_format import AtomicDirectory
from .conll import (  # noqa: F401  (re-exported: the data half of the fine-tuning API)
    DataError,
    TaggedSentence,
    encode_tags,
    label_list,
    load_hub_dataset,
    read_conll,
    read_jsonl,
    sentences_from_dataset,
    sentences_from_pairs,
)
from .configuration_elmo import ElmoConfig
from .data_collator import ElmoDataCollator
from .modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
from .tagging import tag as tag_text
from .tokenization_elmo import ElmoTokenizer

logger = logging.getLogger("hf_elmo.finetune")


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, items: Sequence[dict]):
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


# Metrics -------------------------------------------------------------------------------------


def seqeval_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision / recall / F1 over entities, token accuracy, and `{TYPE}_precision/_recall/_f1/_support`."""
    try:
        from seqeval.metrics import accuracy_score, classification_report
    except ImportError:
        raise SystemExit("evaluation needs seqeval: pip install 'hf-elmo[train]'") from None
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    micro = report.get("micro avg", {"precision": 0.0, "recall": 0.0, "f1-score": 0.0})
    scores = {
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "f1": float(micro["f1-score"]),
        "accuracy": float(accuracy_score(gold, predicted)),
    }
    for entity, values in report.items():
        if entity.endswith(" avg"):
            continue
        scores[f"{entity}_precision"] = float(values["precision"])
        scores[f"{entity}_recall"] = float(values["recall"])
        scores[f"{entity}_f1"] = float(values["f1-score"])
        scores[f"{entity}_support"] = int(values["support"])
    return scores


def tag_metrics_function(id2label: dict[int, str]):
    """`compute_metrics` for the `Trainer`: reads the model's decoded `predictions` (Viterbi with a CRF)."""

    def compute_metrics(eval_prediction) -> dict[str, float]:
        outputs = eval_prediction.predictions
        predicted_ids = outputs[1] if isinstance(outputs, (tuple, list)) else outputs.argmax(-1)
        gold, predicted = [], []
        for gold_row, predicted_row in zip(eval_prediction.label_ids, predicted_ids):
            keep = gold_row != -100
            gold.append([id2label[int(i)] for i in gold_row[keep]])
            predicted.append([id2label[int(i)] if i >= 0 else "O" for i in predicted_row[keep]])
        return seqeval_scores(gold, predicted)

    return compute_metrics


@torch.no_grad()
def predict_tags(
    model, tokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64, max_words: int | None = None
) -> list[list[str]]:
    """Tags for pre-split sentences (batched by length for speed; output in input order)."""
    collator = ElmoDataCollator(tokenizer, max_words=max_words)
    id2label = model.config.id2label
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results: list[list[str] | None] = [None] * len(sentences)
    try:
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            batch = collator([{"words": list(sentences[i])} for i in chunk])
            batch = {key: value.to(device) for key, value in batch.items()}
            logits = model(**batch).logits
            best = model.decode(logits, batch["attention_mask"].bool()).cpu()
            for row, index in enumerate(chunk):
                count = int(batch["attention_mask"][row].sum())
                tags = [id2label[int(i)] for i in best[row, :count]]
                # Words cut by max_words get "O" so that the output lines up with the input.
                results[index] = tags + ["O"] * (len(sentences[index]) - count)
    finally:
        model.train(was_training)
    return results


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


@dataclass
class FinetuneOptions:
    """Options of `train_tagger` / `train_classifier` (the command line mirrors them)."""

    model: str = ""
    output_dir: str | None = None
    task_encoder: str = "bilstm"
    task_encoder_hidden_size: int | None = None
    use_crf: bool = False
    freeze: bool = True
    random_init: bool = False
    # The head's own trainable word vectors x_k beside the ELMo mix (the paper's [x_k; ELMo_k]).
    task_token_features: bool = False
    dropout: float | None = None
    classifier_hidden_size: int | None = None
    epochs: float = 3.0
    max_steps: int = -1
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    batch_size: int = 32
    eval_batch_size: int = 64
    gradient_accumulation_steps: int = 1
    max_words: int | None = None
    seed: int = 42
    unseen_label: str = "error"
    select_best: bool = True
    # With a frozen biLM its layers are computed once for the training and dev data, so each epoch
    # trains only the head (the paper's setting; same numbers as running the biLM every step).
    precompute_elmo: bool = True
    logging_steps: int = 50
    overwrite: bool = False
    threads: int | None = None
    head_config: dict = field(default_factory=dict)


def load_tokenizer(model_name: str, config: ElmoConfig) -> ElmoTokenizer:
    try:
        return ElmoTokenizer.from_pretrained(model_name)
    except (OSError, ValueError) as error:
        logger.warning("no tokenizer in %s (%s); using the default ElmoTokenizer", model_name, error)
        return ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)


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


def build_model(model_class, options: FinetuneOptions, **config_values):
    """The head on top of `options.model`: pretrained biLM, or (with `random_init`) the same architecture fresh."""
    if options.random_init:
        config = ElmoConfig.from_pretrained(options.model)
        for key, value in config_values.items():
            setattr(config, key, value)
        config._validate()
        return model_class(config)
    return model_class.from_pretrained(options.model, **config_values)


@torch.no_grad()
def precompute_elmo_layers(
    elmo, collator: ElmoDataCollator, examples: Sequence[dict], batch_size: int = 64, keep_input_ids: bool = False
) -> list[dict]:
    """Run a (frozen) biLM once over `examples` and return them with `"elmo_hidden_states"` instead of words.

    Each returned example holds a `(num_lstm_layers + 1, words, 2P)` float tensor (the words as the
    collator cuts them with `max_words`; labels are cut alike) and its `"labels"`. Heads take these
    through `elmo_hidden_states` and then give the same outputs as from the words, without the biLM.
    Memory: (L + 1) * 2P floats per word, e.g. 3 KB per word for `elmo-zh-small`.
    With `keep_input_ids` the words' character ids stay too (`"input_ids"`, for heads with their own word
    vectors, `config.task_token_features`).
    """
    was_training = elmo.training
    elmo.eval()
    device = next(elmo.parameters()).device
    lengths = [len(example["words"]) if "words" in example else 0 for example in examples]
    order = sorted(range(len(examples)), key=lambda i: lengths[i])  # fewer padded positions per batch
    results: list[dict | None] = [None] * len(examples)
    try:
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            batch = collator([{key: value for key, value in examples[i].items() if key != "labels"} for i in chunk])
            outputs = elmo(batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device))
            layers = torch.stack(outputs.hidden_states, dim=1).cpu()  # (B, L + 1, W, 2P)
            for row, index in enumerate(chunk):
                count = int(batch["attention_mask"][row].sum())
                item = {"elmo_hidden_states": layers[row, :, :count].clone()}
                if keep_input_ids:
                    item["input_ids"] = batch["input_ids"][row, :count].clone()
                labels = examples[index].get("labels")
                if labels is not None:
                    item["labels"] = labels if isinstance(labels, int) else list(labels)[:count]
                results[index] = item
    finally:
        elmo.train(was_training)
    return results


def _maybe_precompute(model, collator, options: FinetuneOptions, *example_lists):
    """`precompute_elmo_layers` for each list when the biLM is frozen and `options.precompute_elmo` is on."""
    if not (options.precompute_elmo and model.config.freeze_elmo):
        return example_lists
    started = time.time()
    computed = tuple(
        precompute_elmo_layers(
            model.elmo, collator, examples, options.eval_batch_size, keep_input_ids=model.config.task_token_features
        )
        if examples
        else examples
        for examples in example_lists
    )
    logger.info("biLM layers of %d examples precomputed in %.1f s", sum(len(e or []) for e in example_lists),
                time.time() - started)
    return computed


def _training_arguments(options: FinetuneOptions, checkpoint_dir: str, has_dev: bool, metric: str):
    from transformers import TrainingArguments

    select_best = options.select_best and has_dev
    return TrainingArguments(
        output_dir=checkpoint_dir,
        num_train_epochs=options.epochs,
        max_steps=options.max_steps,
        learning_rate=options.learning_rate,
        weight_decay=options.weight_decay,
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.eval_batch_size,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        seed=options.seed,
        data_seed=options.seed,
        eval_strategy="epoch" if has_dev else "no",
        save_strategy="epoch" if select_best else "no",
        save_only_model=True,
        save_total_limit=1 if select_best else None,
        load_best_model_at_end=select_best,
        metric_for_best_model=metric if select_best else None,
        greater_is_better=True,
        logging_steps=options.logging_steps,
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def _checkpoint_dir(options: FinetuneOptions):
    parent = Path(options.output_dir).resolve().parent if options.output_dir else None
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".hf-elmo-checkpoints-", dir=parent)


def save_folder(model, tokenizer, output_dir: str, results: dict, overwrite: bool = False) -> Path:
    """Model + tokenizer + results.json, written atomically."""
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(output_dir)


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
    from transformers import Trainer, set_seed

    options = options or FinetuneOptions()
    if options.output_dir and Path(options.output_dir).exists() and not options.overwrite:
        raise FileExistsError(f"{options.output_dir} already exists (pass --overwrite to replace it)")
    if options.threads:
        torch.set_num_threads(options.threads)
    if not train:
        raise DataError("no training sentences")
    set_seed(options.seed)
    labels = label_list(train)
    label2id = {label: i for i, label in enumerate(labels)}
    id2label = dict(enumerate(labels))
    train_examples = encode_tags(train, label2id, "error", "train")
    dev_examples = encode_tags(dev, label2id, options.unseen_label, "dev") if dev else None

    head = {"task_encoder": options.task_encoder, "use_crf": options.use_crf}
    if options.task_encoder_hidden_size is not None:
        head["task_encoder_hidden_size"] = options.task_encoder_hidden_size
    model = build_model(
        ElmoForTokenClassification,
        options,
        num_labels=len(labels),
        id2label=id2label,
        label2id=label2id,
        **_head_config(options, head),
    )
    tokenizer = load_tokenizer(options.model, model.config)
    collator = ElmoDataCollator(tokenizer, max_words=options.max_words)
    started = time.time()
    train_examples, dev_examples = _maybe_precompute(model, collator, options, train_examples, dev_examples)
    precompute_seconds = time.time() - started
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info(
        "labels %s; %d trainable of %d parameters", labels, trainable, sum(p.numel() for p in model.parameters())
    )

    started = time.time()
    with _checkpoint_dir(options) as checkpoint_dir:
        trainer = Trainer(
            model=model,
            args=_training_arguments(options, checkpoint_dir, dev_examples is not None, "f1"),
            train_dataset=ListDataset(train_examples),
            eval_dataset=ListDataset(dev_examples) if dev_examples else None,
            data_collator=collator,
            compute_metrics=tag_metrics_function(id2label),
        )
        train_output = trainer.train()
        model = trainer.model
    train_seconds = time.time() - started

    results = {
        "task": "token-classification",
        "labels": labels,
        "train_sentences": len(train),
        "trainable_parameters": trainable,
        "train_seconds": round(train_seconds, 1),
        "precompute_seconds": round(precompute_seconds, 1),
        "train_loss": float(train_output.training_loss),
        "options": {k: v for k, v in asdict(options).items() if k not in ("output_dir", "overwrite")},
    }
    if dev:
        results["dev"] = evaluate_tagger(model, tokenizer, dev, options.eval_batch_size, options.unseen_label)
    if test:
        results["test"] = evaluate_tagger(model, tokenizer, test, options.eval_batch_size, options.unseen_label)
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
    """
    from transformers import Trainer, set_seed

    options = options or FinetuneOptions()
    if options.output_dir and Path(options.output_dir).exists() and not options.overwrite:
        raise FileExistsError(f"{options.output_dir} already exists (pass --overwrite to replace it)")
    if options.threads:
        torch.set_num_threads(options.threads)
    if not train:
        raise DataError("no training examples")
    set_seed(options.seed)
    labels = sorted({label for _, label in train})
    label2id = {label: i for i, label in enumerate(labels)}

    def encode(pairs, split):
        examples = []
        for index, (text, label) in enumerate(pairs):
            if label not in label2id:
                raise DataError(
                    f"{split}: example {index + 1} has label {label!r}, unseen in training (known: {labels})"
                )
            key = "text" if isinstance(text, str) else "words"
            examples.append({key: text if isinstance(text, str) else list(text), "labels": label2id[label]})
        return examples

    model = build_model(
        ElmoForSequenceClassification,
        options,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id=label2id,
        **_head_config(options, {}),
    )
    tokenizer = load_tokenizer(options.model, model.config)
    collator = ElmoDataCollator(tokenizer, max_words=options.max_words)

    def examples_for(pairs, split):
        examples = encode(pairs, split)
        if examples and "text" in examples[0]:  # the same words the collator would make of the text
            examples = [{"words": tokenizer.tokenize(e["text"]), "labels": e["labels"]} for e in examples]
        (computed,) = _maybe_precompute(model, collator, options, examples)
        return ListDataset(computed)

    def accuracy(eval_prediction) -> dict[str, float]:
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, (tuple, list)) else logits
        return {"accuracy": float((logits.argmax(-1) == eval_prediction.label_ids).mean())}

    started = time.time()
    with _checkpoint_dir(options) as checkpoint_dir:
        trainer = Trainer(
            model=model,
            args=_training_arguments(options, checkpoint_dir, bool(dev), "accuracy"),
            train_dataset=examples_for(train, "train"),
            eval_dataset=examples_for(dev, "dev") if dev else None,
            data_collator=collator,
            compute_metrics=accuracy,
        )
        train_output = trainer.train()
        results = {
            "task": "sequence-classification",
            "labels": labels,
            "train_examples": len(train),
            "train_seconds": round(time.time() - started, 1),
            "train_loss": float(train_output.training_loss),
            "options": {k: v for k, v in asdict(options).items() if k not in ("output_dir", "overwrite")},
        }
        for split, pairs in (("dev", dev), ("test", test)):
            if pairs:
                metrics = trainer.evaluate(examples_for(pairs, split), metric_key_prefix=split)
                results[split] = {"accuracy": metrics[f"{split}_accuracy"], "loss": metrics[f"{split}_loss"]}
        model = trainer.model
    if options.output_dir:
        save_folder(model, tokenizer, options.output_dir, results, options.overwrite)
    return {"model": model, "tokenizer": tokenizer, "results": results}


def read_classification_file(path: str) -> list[tuple[str, str]]:
    """`label<TAB>text` per line."""
    pairs = []
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                label, sep, text = line.partition("\t")
                if not sep or not label.strip() or not text.strip():
                    raise DataError(f"{path}:{number}: expected 'label<TAB>text', got {line!r}")
                pairs.append((text, label.strip()))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    if not pairs:
        raise DataError(f"{path}: no examples found (empty file?)")
    return pairs


# Command line --------------------------------------------------------------------------------


def format_scores(title: str, scores: dict[str, float]) -> str:
    """A small P/R/F1 table: overall, then each entity type."""
    types = sorted({key.rsplit("_", 1)[0] for key in scores if key.endswith("_f1")})
    rows = [f"{title}", f"{'type':<10} {'P':>7} {'R':>7} {'F1':>7} {'support':>8}"]
    rows.append(f"{'overall':<10} {scores['precision']:7.4f} {scores['recall']:7.4f} {scores['f1']:7.4f}")
    for name in types:
        rows.append(
            f"{name:<10} {scores[name + '_precision']:7.4f} {scores[name + '_recall']:7.4f} "
            f"{scores[name + '_f1']:7.4f} {scores[name + '_support']:8d}"
        )
    return "\n".join(rows)


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="pretrained ELMo folder or Hub name (e.g. hf_elmo.DEFAULT_MODEL)"
    )
    parser.add_argument("--output-dir", required=True, help="folder to write the fine-tuned model into")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument(
        "--freeze", dest="freeze", action="store_true", default=True, help="keep the biLM fixed (default)"
    )
    parser.add_argument("--no-freeze", dest="freeze", action="store_false", help="fine-tune the biLM too")
    parser.add_argument(
        "--random-init", action="store_true", help="same architecture, biLM randomly initialised (a baseline)"
    )
    parser.add_argument(
        "--token-features",
        dest="task_token_features",
        action="store_true",
        help="give the head its own trainable word vectors x_k (a character CNN started from the biLM's layer 0) "
        "and feed it [x_k; ELMo_k], as the paper adds ELMo to a task model",
    )
    parser.add_argument(
        "--dropout", type=float, default=None, help="dropout on the ELMo mix and in the head (default 0.5)"
    )
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument(
        "--max-steps", type=int, default=-1, help="stop after this many optimiser steps (overrides --epochs)"
    )
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (AdamW, linear decay)")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps")
    parser.add_argument("--max-words", type=int, default=None, help="cut training sentences to this many words")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--no-select-best", dest="select_best", action="store_false", help="keep the last epoch, not the best on dev"
    )
    parser.add_argument(
        "--no-precompute-elmo", dest="precompute_elmo", action="store_false",
        help="run the frozen biLM at every step instead of computing its layers once (less memory)",
    )


def _options(args: argparse.Namespace, **extra) -> FinetuneOptions:
    return FinetuneOptions(
        model=args.model,
        output_dir=args.output_dir,
        overwrite=args.overwrite,
        freeze=args.freeze,
        random_init=args.random_init,
        task_token_features=args.task_token_features,
        dropout=args.dropout,
        epochs=args.epochs,
        max_steps=args.max_steps,
        learning_rate=args.lr,
        weight_decay=args.weight_decay,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_words=args.max_words,
        seed=args.seed,
        threads=args.threads,
        select_best=args.select_best,
        precompute_elmo=args.precompute_elmo,
        **extra,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-elmo finetune",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="fine-tune a tagger (NER, POS, ...)")
    data = train.add_mutually_exclusive_group(required=True)
    data.add_argument("--train", help="training file: CoNLL-style (word<TAB>tag) or .jsonl")
    data.add_argument("--dataset", help="a `datasets` dataset (local path or cached name) with train/validation/test")
    train.add_argument("--dev", help="development file (model selection by dev F1)")
    train.add_argument("--test", help="test file (scored once at the end)")
    train.add_argument("--dataset-config", default=None)
    train.add_argument("--words-column", default="tokens")
    train.add_argument("--tags-column", default="ner_tags")
    train.add_argument("--task-encoder", choices=("linear", "bilstm"), default="bilstm")
    train.add_argument("--hidden-size", type=int, default=None, help="task BiLSTM size per direction (default 200)")
    train.add_argument("--use-crf", action="store_true", help="CRF layer with Viterbi decoding")
    train.add_argument(
        "--unseen-label", choices=("error", "O"), default="error", help="dev/test labels unseen in training"
    )
    _add_training_options(train)

    classify = commands.add_parser("train-classifier", help="fine-tune a sentence classifier (label<TAB>text files)")
    classify.add_argument("--train", required=True)
    classify.add_argument("--dev")
    classify.add_argument("--test")
    classify.add_argument("--classifier-hidden-size", type=int, default=None, help="MLP hidden size (0 = linear)")
    _add_training_options(classify)

    predict = commands.add_parser("predict", help="tag raw text; prints one JSON object per input line")
    predict.add_argument("--model", required=True, help="a fine-tuned tagger folder")
    predict.add_argument("text", nargs="*", help="texts to tag (or use --input)")
    predict.add_argument("--input", help="file with one text per line ('-' = stdin)")
    predict.add_argument("--split-into-words", action="store_true", help="inputs are already space-separated words")
    predict.add_argument("--batch-size", type=int, default=32)

    evaluate = commands.add_parser("evaluate", help="score a fine-tuned tagger on a labelled file")
    evaluate.add_argument("--model", required=True)
    evaluate.add_argument("--test", required=True)
    evaluate.add_argument("--batch-size", type=int, default=64)
    evaluate.add_argument("--unseen-label", choices=("error", "O"), default="error")
    return parser


def _load_tagger(folder: str):
    model = ElmoForTokenClassification.from_pretrained(folder)
    return model, load_tokenizer(folder, model.config)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("hf_elmo").setLevel(logging.INFO)
    try:
        if args.command == "train":
            if args.dataset:
                splits = load_hub_dataset(args.dataset, args.dataset_config, args.words_column, args.tags_column)
            else:
                splits = {"train": read_conll(args.train)}
                for split in ("dev", "test"):
                    if getattr(args, split):
                        splits[split] = read_conll(getattr(args, split))
            options = _options(
                args,
                task_encoder=args.task_encoder,
                task_encoder_hidden_size=args.hidden_size,
                use_crf=args.use_crf,
                unseen_label=args.unseen_label,
            )
            results = train_tagger(splits["train"], splits.get("dev"), splits.get("test"), options)["results"]
            for split in ("dev", "test"):
                if split in results:
                    print(format_scores(f"{split}:", results[split]))
            print(f"saved to {args.output_dir}")
        elif args.command == "train-classifier":
            splits = {
                name: read_classification_file(getattr(args, name))
                for name in ("train", "dev", "test")
                if getattr(args, name)
            }
            options = _options(args, classifier_hidden_size=args.classifier_hidden_size)
            results = train_classifier(splits["train"], splits.get("dev"), splits.get("test"), options)["results"]
            for split in ("dev", "test"):
                if split in results:
                    print(f"{split}: accuracy {results[split]['accuracy']:.4f}")
            print(f"saved to {args.output_dir}")
        elif args.command == "predict":
            model, tokenizer = _load_tagger(args.model)
            texts = list(args.text)
            if args.input:
                handle = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8-sig")
                with handle:
                    texts += [line.rstrip("\r\n") for line in handle if line.strip()]
            if not texts:
                raise DataError("nothing to tag: give texts as arguments or --input FILE")
            inputs = [text.split() for text in texts] if args.split_into_words else texts
            for result in tag_text(
                model, tokenizer, inputs, is_split_into_words=args.split_into_words, batch_size=args.batch_size
            ):
                print(json.dumps(result, ensure_ascii=False))
        elif args.command == "evaluate":
            model, tokenizer = _load_tagger(args.model)
            scores = evaluate_tagger(model, tokenizer, read_conll(args.test), args.batch_size, args.unseen_label)
            print(format_scores(f"{args.test}:", scores))
            print(json.dumps(scores, ensure_ascii=False))
    except (DataError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
