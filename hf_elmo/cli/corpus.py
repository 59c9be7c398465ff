"""`hf-elmo corpus segment|vocab`: prepare a pretraining corpus and its vocabulary."""

from __future__ import annotations

HELP = "prepare a pretraining corpus: segment raw text, build the vocabulary"
DESCRIPTION = "Prepare a pretraining corpus and its vocabulary."


def add_arguments(parser) -> None:
    commands = parser.add_subparsers(dest="corpus_command", required=True)
    segment = commands.add_parser("segment", help="raw text (one sentence or paragraph a line) -> words split by spaces")
    segment.add_argument("--input", required=True, help="UTF-8 text file")
    segment.add_argument("--output", required=True, help="corpus file to write: one line per input line, words split by spaces")
    segment.add_argument(
        "--segmenter", choices=["jieba", "chars", "whitespace"], default="jieba",
        help="jieba (Chinese words), chars (one word per character) or whitespace (default: jieba)",
    )
    segment.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    vocab = commands.add_parser("vocab", help="build <S>, </S>, <UNK> + words by frequency")
    vocab.add_argument("--corpus", nargs="+", required=True, help="corpus files: one sentence a line, words split by spaces")
    vocab.add_argument("--output", required=True, help="vocabulary file to write, one word a line")
    vocab.add_argument("--min-count", type=int, default=1, help="keep words seen at least this often (>= 1)")
    vocab.add_argument(
        "--max-size", type=int, default=None, help="at most this many entries, the three specials included (>= 4)"
    )
    vocab.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    shopping = commands.add_parser(
        "shopping",
        help="split online_shopping_10_cats.csv by a hash of each review into train/dev/test "
        ".sentiment.tsv and .category.tsv (label<TAB>text) and pretrain.txt (train part only, jieba words)",
    )
    shopping.add_argument("--input", required=True, help="online_shopping_10_cats.csv (cat,label,review)")
    shopping.add_argument("--output-dir", "--output", dest="output_dir", required=True, help="folder for the six .tsv files and pretrain.txt")
    shopping.add_argument("--salt", default="", help="prefix hashed with each review: another salt, another split")
    shopping.add_argument("--overwrite", action="store_true", help="replace the seven files if --output-dir holds them")


def check(args) -> None:
    from ..utils.io import check_output_path
    from .common import check_input_file, check_output_apart

    if args.corpus_command == "shopping":
        check_input_file(args.input)
        return
    inputs = [("--input", args.input)] if args.corpus_command == "segment" else [("--corpus", path) for path in args.corpus]
    check_output_apart(args.output, "--output", files=inputs)
    check_output_path(args.output, args.overwrite)
    for _, path in inputs:
        check_input_file(path, "corpus")


def run(args) -> int:
    from ..utils.io import check_output_path, output_lock

    if args.corpus_command == "shopping":  # its seven files are one unit, which locks and sweeps itself
        from ..pretraining.chinese_corpora import write_online_shopping

        counts = write_online_shopping(args.input, args.output_dir, args.salt, overwrite=args.overwrite)
        print(" ".join(f"{name}={count}" for name, count in counts.items()))
        return 0
    with output_lock(args.output):
        if args.corpus_command == "segment":
            from ..pretraining.data import segment_corpus_file

            count = segment_corpus_file(args.input, args.output, args.segmenter, overwrite=args.overwrite)
            print(f"wrote {count} lines to {args.output}")
            return 0
        from ..pretraining.data import (
            SPECIAL_WORDS,
            build_vocabulary,
            check_corpus_file,
            check_vocabulary_limits,
            save_vocabulary,
        )

        check_output_path(args.output, args.overwrite)
        check_vocabulary_limits(args.min_count, args.max_size, ("--min-count", "--max-size"))
        for path in args.corpus:
            check_corpus_file(path)
        words = build_vocabulary(args.corpus, min_count=args.min_count, max_size=args.max_size)
        save_vocabulary(words, args.output, overwrite=args.overwrite)
        print(f"wrote {len(words)} entries ({len(words) - len(SPECIAL_WORDS)} words + <S>, </S>, <UNK>) to "
              f"{args.output}")
        return 0


def after_interruption(args) -> str:
    if args.corpus_command == "shopping":
        return f"{args.output_dir} holds either its previous files or the complete new set, never a mix"
    return "no output was written"
