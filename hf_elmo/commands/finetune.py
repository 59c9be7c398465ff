"""`hf-elmo finetune` (also `python -m hf_elmo.finetune`): its options, and the sub-commands driving hf_elmo.finetune."""

from __future__ import annotations

import argparse

HELP = "fine-tune ELMo with a task head"
DESCRIPTION = "Fine-tune ELMo on word-level tagging (NER, POS, ...) or sentence classification with the `Trainer`."


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default="default",
        help="pretrained ELMo folder or Hub name; 'default' (the default) is the Chinese model shipped with hf-elmo",
    )
    parser.add_argument("--output-dir", required=True, help="folder to write the fine-tuned model into")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    freezing = parser.add_mutually_exclusive_group()
    freezing.add_argument(
        "--freeze", dest="freeze", action="store_true", default=True, help="keep the biLM fixed (default)"
    )
    freezing.add_argument("--no-freeze", dest="freeze", action="store_false", help="fine-tune the biLM too")
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
        "--dropout", type=float, default=None,
        help="dropout on the ELMo mix and in the head (default: 0.3 for train, 0.5 for train-classifier)",
    )
    parser.add_argument(
        "--epochs", type=float, default=None,
        help="passes over the training data (> 0; default: 10 for train, 3 for train-classifier)",
    )
    parser.add_argument(
        "--max-steps", type=int, default=-1,
        help="stop after this many optimiser steps (overrides --epochs; -1, the default, = use --epochs)",
    )
    parser.add_argument(
        "--lr", type=float, default=None,
        help="learning rate (AdamW, linear decay; default: 5e-3 for train with the biLM frozen, otherwise 1e-3)",
    )
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per training step")
    parser.add_argument("--eval-batch-size", type=int, default=64, help="sentences per evaluation batch")
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



def _add_tagger_arguments(train) -> None:
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
        "--label-characters", action=argparse.BooleanOptionalAction, default=None,
        help="the file labels single characters (MSRA, most Chinese NER sets): the biLM reads the jieba words they "
        "form and each character gets its word's vectors plus its place in the word (S/B/M/E); tags stay per "
        "character. Default: on when 90%% of the training tokens are single Chinese characters and the model "
        "reads jieba words",
    )
    train.add_argument(
        "--character-features", dest="task_character_features", action=argparse.BooleanOptionalAction, default=None,
        help="with --label-characters and --token-features: each character also gets the head's own vector x_k of "
        "the character alone (the characters of one jieba word otherwise share the word's vectors). Default: on "
        "whenever both are",
    )
    train.add_argument(
        "--unseen-label", choices=("error", "O"), default="error", help="dev/test labels unseen in training"
    )
    _add_training_options(train)


def add_arguments(parser) -> None:
    commands = parser.add_subparsers(dest="finetune_command", required=True)

    _add_tagger_arguments(commands.add_parser("train", help="fine-tune a tagger (NER, POS, ...)"))

    classify = commands.add_parser(
        "train-classifier",
        help="fine-tune a sentence classifier (label<TAB>text files)",
        description="Fine-tune a sentence classifier on label<TAB>text lines. Training data with one label, or "
        "(from 20 examples on) with more distinct labels than half the examples or than distinct texts, is "
        "refused: that is what a word<TAB>tag (CoNLL) file looks like, and those are for `train`.",
    )
    classify.add_argument("--train", required=True)
    classify.add_argument("--dev")
    classify.add_argument("--test")
    classify.add_argument("--classifier-hidden-size", type=int, default=None, help="MLP hidden size (0 = linear)")
    _add_training_options(classify)

    predict = commands.add_parser(
        "predict",
        help="tag raw text; prints one JSON object per input line",
        description="Tag raw text. Prints one JSON object per input (the texts given as arguments, then each "
        "line of --input), in input order: a blank line gets an empty result (no words, no tags), so output "
        "line N always belongs to input N.",
    )
    predict.add_argument("--model", required=True, help="a fine-tuned tagger folder (the --output-dir of `train`)")
    predict.add_argument("text", nargs="*", help="texts to tag (or use --input)")
    predict.add_argument(
        "--input", help="UTF-8 file with one text per line ('-' = stdin); a blank line gives an empty result"
    )
    predict.add_argument("--split-into-words", action="store_true", help="inputs are already space-separated words")
    predict.add_argument("--batch-size", type=int, default=32, help="sentences per batch (>= 1)")

    evaluate = commands.add_parser("evaluate", help="score a fine-tuned tagger on a labelled file")
    evaluate.add_argument("--model", required=True, help="a fine-tuned tagger folder (the --output-dir of `train`)")
    evaluate.add_argument("--test", required=True)
    evaluate.add_argument("--batch-size", type=int, default=64, help="sentences per batch (>= 1)")
    evaluate.add_argument("--unseen-label", choices=("error", "O"), default="error")




def after_interruption(args) -> str:
    if args.finetune_command in ("train", "train-classifier"):
        from ..finetune import checkpoint_folder_for

        return (
            f"nothing was written to {args.output_dir}; the same command resumes from the last finished epoch "
            f"kept in {checkpoint_folder_for(args.output_dir)} (or starts again if none had finished)"
        )
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


def _options(args: argparse.Namespace, **extra):
    from ..finetune import FinetuneOptions

    options = FinetuneOptions(
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
    options.check()  # before any file is read or model loaded
    return options


def _train(args) -> None:
    from ..conll import check_tagging_labels, load_hub_dataset, read_conll
    from ..finetune import train_tagger

    options = _options(args, task_encoder=args.task_encoder, task_encoder_hidden_size=args.hidden_size,
                       use_crf=args.use_crf, unseen_label=args.unseen_label, label_characters=args.label_characters,
                       task_character_features=args.task_character_features)
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
    from ..conll import check_classification_labels, read_classification_file
    from ..finetune import train_classifier

    options = _options(args, classifier_hidden_size=args.classifier_hidden_size)
    splits = {name: read_classification_file(getattr(args, name)) for name in ("train", "dev", "test") if getattr(args, name)}
    check_classification_labels(splits["train"], args.train)
    results = train_classifier(splits["train"], splits.get("dev"), splits.get("test"), options)["results"]
    for split in ("dev", "test"):
        if split in results:
            print(f"{split}: accuracy {results[split]['accuracy']:.4f}")
    print(f"saved to {args.output_dir}")


def _predict(args) -> None:
    import json

    from ..conll import DataError, read_text_lines
    from ..finetune import check_batch_size, load_tagger
    from ..tagging import tag

    check_batch_size(args.batch_size)
    texts = list(args.text)
    if args.input:
        texts += read_text_lines(args.input)  # blank lines too: one output line per input line
    if not texts:
        raise DataError(f"nothing to tag: {args.input} is empty" if args.input else
                        "nothing to tag: give texts as arguments or --input FILE")
    model, tokenizer = load_tagger(args.model)
    inputs = [text.split() for text in texts] if args.split_into_words else texts
    for result in tag(model, tokenizer, inputs, is_split_into_words=args.split_into_words, batch_size=args.batch_size):
        print(json.dumps(result, ensure_ascii=False))


def _evaluate(args) -> None:
    import json

    from ..conll import read_conll
    from ..finetune import check_batch_size, evaluate_tagger, load_tagger

    check_batch_size(args.batch_size)
    test = read_conll(args.test)
    model, tokenizer = load_tagger(args.model)
    scores = evaluate_tagger(model, tokenizer, test, args.batch_size, args.unseen_label)
    print(format_scores(f"{args.test}:", scores))
    print(json.dumps(scores, ensure_ascii=False))


SUB_COMMANDS = {"train": _train, "train-classifier": _train_classifier, "predict": _predict, "evaluate": _evaluate}


def run(args) -> int:
    """Run a parsed `hf-elmo finetune` sub-command."""
    import logging

    if getattr(args, "output_dir", None):
        from .common import remove_leftovers

        remove_leftovers(args.output_dir)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("hf_elmo").setLevel(logging.INFO)
    SUB_COMMANDS[args.finetune_command](args)
    return 0
