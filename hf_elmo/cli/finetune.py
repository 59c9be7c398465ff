"""`hf-elmo finetune` (also `python -m hf_elmo.cli finetune`): its options, and the sub-commands driving hf_elmo.finetuning.run."""

from __future__ import annotations

import argparse
import contextlib
import os

from ..finetuning.options import COMMAND_OPTIONS, FIELDS, FinetuneOptions, OptionError, check_batch_size
from .common import (
    OptionsHelpFormatter,
    add_dataclass_options,
    add_user_dict_argument,
    check_input_file,
    check_model_folder,
    check_output_apart,
    check_user_dict,
)

HELP = "fine-tune ELMo with a task head"
DESCRIPTION = "Fine-tune ELMo on word-level tagging (NER, POS, ...) or sentence classification with the `Trainer`."


def add_arguments(parser) -> None:
    commands = parser.add_subparsers(dest="finetune_command", required=True)
    add_dataclass_options(commands.add_parser("train", help="fine-tune a tagger (NER, POS, ...)",
                                              formatter_class=OptionsHelpFormatter), *COMMAND_OPTIONS["train"])
    classify = commands.add_parser(
        "train-classifier",
        help="fine-tune a sentence classifier (label<TAB>text files)",
        description="Fine-tune a sentence classifier on label<TAB>text lines. Training data with one label, or "
        "(from 20 examples on) with more distinct labels than half the examples or than distinct texts, is "
        "refused: that is what a word<TAB>tag (CoNLL) file looks like, and those are for `train`.",
        formatter_class=OptionsHelpFormatter,
    )
    add_dataclass_options(classify, *COMMAND_OPTIONS["train-classifier"])

    predict = commands.add_parser(
        "predict",
        help="tag or classify raw text; prints one JSON object per input line",
        description="Tag raw text with a tagger, or label it with a sentence classifier. Prints one JSON object per "
        "input (the texts given as arguments, then each line of --input), in input order: words, tags and entities, "
        "or the label, its probability (score) and every label's (scores). A blank line gets an empty result (no "
        "words, no tags or label), so output line N always belongs to input N.",
    )
    predict.add_argument("--model", required=True, help="a fine-tuned tagger or sentence classifier folder (the "
                         "--output-dir of `train` or `train-classifier`)")
    predict.add_argument("text", nargs="*", help="texts to tag (or use --input)")
    predict.add_argument(
        "--input", help="UTF-8 file with one text per line ('-' = stdin); a blank line gives an empty result"
    )
    predict.add_argument("--split-into-words", action="store_true", help="inputs are already space-separated words")
    add_user_dict_argument(predict)
    predict.add_argument("--batch-size", type=int, default=32, help="sentences per batch (>= 1)")

    evaluate = commands.add_parser("evaluate", help="score a fine-tuned tagger on a labelled file")
    evaluate.add_argument("--model", required=True, help="a fine-tuned tagger folder (the --output-dir of `train`)")
    evaluate.add_argument("--test", required=True)
    evaluate.add_argument("--batch-size", type=int, default=64, help="sentences per batch (>= 1)")
    evaluate.add_argument("--unseen-label", choices=("error", "O"), default="error")




def after_interruption(args) -> str:
    # Ctrl-C may come while torch is half imported: nothing here may import it.
    if args.finetune_command in ("train", "train-classifier"):
        from pathlib import Path

        from ..utils.checkpoints import checkpoint_folder_for, last_complete_checkpoint

        folder = checkpoint_folder_for(args.output_dir)
        checkpoint = last_complete_checkpoint(Path(folder)) if os.path.isdir(folder) else None
        resumes = f"resumes from {checkpoint}" if checkpoint else "starts again (no checkpoint had been written)"
        return f"nothing was written to {args.output_dir}; the same command {resumes}"
    return "no output was written"


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


def _options(args: argparse.Namespace) -> FinetuneOptions:
    """The library's options from the parsed command line (their ranges checked), the output folder checked."""
    if not args.train and not getattr(args, "dataset", None):
        raise OptionError("give the training data: --train FILE" + (" or --dataset NAME" if "dataset" in args else ""))
    if args.train and getattr(args, "dataset", None):
        raise OptionError("give --train or --dataset, not both")
    options = FinetuneOptions(**{name: getattr(args, name) for name in FIELDS if name in args})
    options.check()  # before any file is read or model loaded
    return options


def _train(args) -> None:
    from ..finetuning.conll import check_tagging_labels, load_hub_dataset, read_conll
    from ..finetuning.run import train_tagger

    options = _options(args)
    if args.dataset:
        splits = load_hub_dataset(args.dataset, args.dataset_config, args.words_column, args.tags_column)
    else:
        splits = {split: read_conll(getattr(args, split)) for split in ("train", "dev", "test") if getattr(args, split)}
    check_tagging_labels(splits["train"], args.train or args.dataset)
    results = train_tagger(splits["train"], splits.get("dev"), splits.get("test"), options)["results"]
    for split in ("dev", "test"):
        if split in results:
            print(format_scores(f"{split}:", results[split]))
    print(f"saved to {args.output_dir}")


def _train_classifier(args) -> None:
    from ..finetuning.conll import check_classification_labels, read_classification_file
    from ..finetuning.run import train_classifier

    options = _options(args)
    splits = {name: read_classification_file(getattr(args, name)) for name in ("train", "dev", "test") if getattr(args, name)}
    check_classification_labels(splits["train"], args.train)
    results = train_classifier(splits["train"], splits.get("dev"), splits.get("test"), options)["results"]
    for split in ("dev", "test"):
        if split in results:
            print(f"{split}: accuracy {results[split]['accuracy']:.4f}")
    print(f"saved to {args.output_dir}")


def _predict(args) -> None:
    import json
    import logging
    import re

    from ..finetuning.conll import DataError, read_text_lines
    from ..finetuning.predict import tag
    from ..finetuning.run import classify, load_finetuned
    from ..models.elmo.modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification

    texts = list(args.text)
    if args.input:
        texts += read_text_lines(args.input)  # blank lines too: one output line per input line
    if not texts:
        raise DataError(f"nothing to tag: {args.input} is empty" if args.input else
                        "nothing to tag: give texts as arguments or --input FILE")
    model, tokenizer = load_finetuned(args.model, (ElmoForTokenClassification, ElmoForSequenceClassification),
                                      "predict", user_dict=args.user_dict)
    inputs = [text.split() for text in texts] if args.split_into_words else texts
    readable = tokenizer.max_characters_per_token - 2  # the characters of a word the model reads
    too_long = [word for words in inputs for word in words if len(word) > readable] if args.split_into_words else []
    if too_long:  # unsplit text read as pre-split: each sentence would be one cut "word", silently
        logging.getLogger(__name__).warning(
            "%d of the words given with --split-into-words are longer than the %d characters the model reads (e.g. "
            "%r): --split-into-words expects words separated by spaces; leave it out to split raw text",
            len(too_long), readable, too_long[0][:20])
    predict = classify if isinstance(model, ElmoForSequenceClassification) else tag
    for text, result in zip(texts, predict(model, tokenizer, inputs, is_split_into_words=args.split_into_words,
                                           batch_size=args.batch_size)):
        if args.split_into_words and "entities" in result:  # the given words' places in their line
            places = [match.span() for match in re.finditer(r"\S+", text)]  # what str.split() splits
            for entity in result["entities"]:
                entity["start"], entity["end"] = places[entity["word_start"]][0], places[entity["word_end"] - 1][1]
                entity["word"] = text[entity["start"] : entity["end"]]
            result["text"] = text
        print(json.dumps(result, ensure_ascii=False))


def _evaluate(args) -> None:
    import json

    from ..finetuning.conll import read_conll
    from ..finetuning.run import evaluate_tagger, load_tagger

    test = read_conll(args.test)
    model, tokenizer = load_tagger(args.model)
    scores = evaluate_tagger(model, tokenizer, test, args.batch_size, args.unseen_label)
    print(format_scores(f"{args.test}:", scores))
    print(json.dumps(scores, ensure_ascii=False))


def check(args) -> None:
    """The mistakes found without a model, before torch is imported: options, files, the model folder."""
    if args.finetune_command in ("train", "train-classifier"):
        check_output_apart(args.output_dir, "--output-dir",
                           files=[(f"--{split}", getattr(args, split)) for split in ("train", "dev", "test")])
        _options(args)  # with the output refused where it is the --model, contains it or lies inside it
        for split in ("train", "dev", "test"):
            check_input_file(getattr(args, split), f"--{split}")
    elif args.finetune_command == "predict":
        check_batch_size(args.batch_size)
        check_user_dict(args, args.split_into_words, "--split-into-words")
        check_input_file(args.input, "--input")
    else:
        check_batch_size(args.batch_size)
        check_input_file(args.test, "--test")
    check_model_folder(args.model)


SUB_COMMANDS = {"train": _train, "train-classifier": _train_classifier, "predict": _predict, "evaluate": _evaluate}


def run(args) -> int:
    """Run a parsed `hf-elmo finetune` sub-command."""
    import logging

    from transformers.utils import logging as hf_logging

    from ..utils.io import output_lock

    output_dir = getattr(args, "output_dir", None)
    # One writer per output folder for the whole run, refused naming the other run (pid, host, start time).
    with output_lock(output_dir) if output_dir else contextlib.nullcontext():
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("hf_elmo").setLevel(logging.INFO)
        hf_logging.disable_progress_bar()  # transformers' bars for every weight load and checkpoint save
        SUB_COMMANDS[args.finetune_command](args)
    return 0

