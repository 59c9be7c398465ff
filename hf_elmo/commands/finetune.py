"""`hf-elmo finetune` (also `python -m hf_elmo.finetune`): the options; the work is hf_elmo.finetune.run."""

from __future__ import annotations

import argparse

DESCRIPTION = "Fine-tune ELMo on word-level tagging (NER, POS, ...) or sentence classification with the `Trainer`."


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default="default",
        help="pretrained ELMo folder or Hub name; 'default' (the default) is the Chinese model shipped with hf-elmo",
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
    parser.add_argument("--epochs", type=float, default=3.0, help="passes over the training data (> 0)")
    parser.add_argument(
        "--max-steps", type=int, default=-1,
        help="stop after this many optimiser steps (overrides --epochs; -1, the default, = use --epochs)",
    )
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (AdamW, linear decay)")
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



def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "finetune", help="fine-tune ELMo with a task head", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run)
    commands = parser.add_subparsers(dest="finetune_command", required=True)

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


def run(args) -> int:
    if getattr(args, "output_dir", None):
        from .common import remove_leftovers

        remove_leftovers(args.output_dir)
    from ..finetune import run as finetune

    return finetune(args)
