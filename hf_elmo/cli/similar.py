"""`hf-elmo similar`: the words of a corpus whose contextual vectors are nearest to a word in a sentence."""

from __future__ import annotations

import heapq
import json
import sys

from .common import (
    add_model_arguments,
    add_text_arguments,
    batch_memory,
    check_input_file,
    check_model_folder,
    check_user_dict,
    make_embedder,
    read_lines,
    split_lines,
)
from .errors import CommandError

# A local folder's encoder loads as an ElmoBiLm (`common.make_embedder`); the loading registers the ELMo Auto classes
# only where AutoTokenizer is needed (`loading.load_tokenizer`).
REGISTERS_AUTO_CLASSES_ITSELF = True

HELP = "find the words in a corpus whose contextual vectors are nearest to a word in a sentence"
DESCRIPTION = """Occurrence mode (--sentence): rank every word occurrence in --corpus by the cosine between its
contextual vector and that of --word in --sentence; --same-word keeps only occurrences of the
same word (which uses of 小米 mean the grain, which the phone maker?).

Type mode (--types): average each word type's vectors over all its occurrences in the corpus and
list the word types nearest to --word's average (or to --word in --sentence, if given)."""


def add_arguments(parser) -> None:
    parser.add_argument("--corpus", required=True, help="UTF-8 text, one sentence per line (blank lines ignored)")
    parser.add_argument("--word", required=True, help="the query word (must be one of the words after splitting)")
    parser.add_argument("--sentence", help="a sentence containing --word: the context of the query")
    parser.add_argument("--occurrence", type=int, default=1, help="which occurrence of --word in --sentence (default 1)")
    parser.add_argument("--types", action="store_true", help="rank word types by their mean vector instead of occurrences")
    parser.add_argument("--same-word", action="store_true", help="occurrence mode: only occurrences of --word itself")
    parser.add_argument("--min-count", type=int, default=2, help="type mode: ignore words seen fewer times (default 2)")
    parser.add_argument("--top", type=int, default=10, help="how many results (default 10)")
    parser.add_argument("--layer", default="top", help="top (default) | average | mix | a layer index")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_text_arguments(parser)
    add_model_arguments(parser)


def _normalise(matrix):
    import numpy as np

    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _query_vector(embedder, args):
    """The contextual vector of `--word` in `--sentence` (occurrence `--occurrence`)."""
    words = split_lines([args.sentence], args.split, embedder.tokenizer, args.max_words_per_line, "--sentence")[0]
    positions = [i for i, word in enumerate(words) if word == args.word]
    if not positions:
        raise CommandError(f"--word {args.word!r} is not one of the words of --sentence: {' '.join(words)}")
    if not 1 <= args.occurrence <= len(positions):
        raise CommandError(f"--occurrence {args.occurrence}: {args.word!r} occurs {len(positions)} time(s) in the sentence")
    vectors = embedder.embed([words], layers=args.layer)[0]
    return vectors[positions[args.occurrence - 1]]


def check(args) -> None:
    if args.layer == "all":
        raise CommandError("--layer all gives several vectors per word; choose top, average, mix or a layer index")
    if not args.types and not args.sentence:
        given = "--sentence is empty: give" if args.sentence is not None else "give"
        raise CommandError(f"{given} --sentence (find similar occurrences) or --types (nearest word types)")
    if args.top < 1:
        raise CommandError(f"--top must be >= 1, got {args.top}")
    if args.min_count < 1:
        raise CommandError(f"--min-count must be >= 1, got {args.min_count}")
    check_input_file(args.corpus, "corpus")
    check_user_dict(args, args.split == "whitespace", "--split whitespace")
    check_model_folder(args.model)


def run(args) -> int:
    from ..integrations.embedder import check_layers

    lines = read_lines(args.corpus, "skip", what="corpus", max_line_bytes=args.max_line_bytes)
    embedder = make_embedder(args)
    try:
        args.layer = check_layers(args.layer, embedder.num_layers)
    except (TypeError, ValueError) as error:
        raise CommandError(str(error)) from None
    word_lists = split_lines(lines, args.split, embedder.tokenizer, args.max_words_per_line, args.corpus)
    progress = not args.no_progress and sys.stderr.isatty()
    with batch_memory(args):
        query = _query_vector(embedder, args) if args.sentence else None
        if args.types:
            results = _similar_types(embedder, word_lists, args, query, progress)
        else:
            results = _similar_tokens(embedder, word_lists, lines, args, query, progress)
    if not results:  # said on stderr, so that --json output stays a plain (empty) list
        if args.types:
            print(f"no word other than {args.word!r} occurs at least --min-count {args.min_count} times in the corpus",
                  file=sys.stderr)
        elif args.same_word:
            print(f"{args.word!r} does not occur in the corpus (as split by --split {args.split})", file=sys.stderr)
    _report_glued_lines(lines, word_lists, args)
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
    elif args.types:
        for rank, item in enumerate(results, start=1):
            count = item["count"]
            print(f"{rank:3d}  {item['cosine']:.4f}  {item['word']}  ({count} occurrence{'' if count == 1 else 's'})")
    else:
        for rank, item in enumerate(results, start=1):
            words = list(item["words"])
            words[item["position"]] = f"【{words[item['position']]}】"
            print(f"{rank:3d}  {item['cosine']:.4f}  {item['word']}  line {item['line']}: {' '.join(words)}")
    return 0


def _report_glued_lines(lines, word_lists, args, shown: int = 10) -> None:
    """Say on stderr which corpus lines hold --word only inside a longer word (e.g. 苹果 in 苹果公司 as jieba
    splits it): they have no occurrence of --word to compare, which would otherwise go unnoticed."""
    glued = [number for number, (line, words) in enumerate(zip(lines, word_lists), start=1)
             if args.word in line and args.word not in words]
    if not glued:
        return
    where = ", ".join(map(str, glued[:shown])) + (f" and {len(glued) - shown} more" if len(glued) > shown else "")
    lines_word = "line" if len(glued) == 1 else "lines"
    print(
        f"{len(glued)} {lines_word} ({where}) hold {args.word!r} only inside a longer word as split by --split "
        f"{args.split}: not compared (split the corpus yourself and pass --split whitespace to compare them)",
        file=sys.stderr,
    )


def _similar_tokens(embedder, word_lists, lines, args, query, progress) -> list[dict]:
    """The `--top` word occurrences in the corpus whose contextual vectors are closest to `query`."""
    import numpy as np

    query = _normalise(query)
    best: list[tuple[float, int, int]] = []  # min-heap of (cosine, line index, position)
    for index, vectors in embedder.iter_embed(word_lists, args.layer, progress=progress):
        words = word_lists[index]
        if not words:
            continue
        scores = _normalise(vectors.float().numpy()) @ query
        if args.same_word:
            candidates = [position for position, word in enumerate(words) if word == args.word]
        else:
            candidates = np.argsort(-scores, kind="stable")[: args.top]
        for position in candidates:
            item = (float(scores[position]), -index, -int(position))
            if len(best) < args.top:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
    ranked = sorted(best, reverse=True)
    return [
        {"cosine": score, "word": word_lists[-i][-p], "line": -i + 1, "position": -p, "words": word_lists[-i]}
        for score, i, p in ranked
    ]


def _similar_types(embedder, word_lists, args, query, progress) -> list[dict]:
    """Word types ranked by the cosine between their mean contextual vector and the query.

    The query is `--word`'s vector in `--sentence` when given, else `--word`'s mean vector over the corpus.
    """
    import numpy as np

    ids: dict[str, int] = {}
    sums = np.zeros((1024, embedder.dim), dtype=np.float64)
    counts = np.zeros(1024, dtype=np.int64)
    for index, vectors in embedder.iter_embed(word_lists, args.layer, progress=progress):
        words = word_lists[index]
        if not words:
            continue
        rows = np.array([ids.setdefault(word, len(ids)) for word in words])
        if len(ids) > len(counts):
            grow = max(len(ids), 2 * len(counts))
            sums = np.concatenate([sums, np.zeros((grow - len(sums), embedder.dim))])
            counts = np.concatenate([counts, np.zeros(grow - len(counts), dtype=np.int64)])
        np.add.at(sums, rows, vectors.double().numpy())
        np.add.at(counts, rows, 1)
    if query is None:
        if args.word not in ids:
            raise CommandError(f"--word {args.word!r} does not occur in the corpus (as split by --split {args.split})")
        query = sums[ids[args.word]] / counts[ids[args.word]]
    words = list(ids)
    means = sums[: len(words)] / np.maximum(counts[: len(words)], 1)[:, None]
    scores = _normalise(means) @ _normalise(np.asarray(query, dtype=np.float64))
    keep = [i for i in np.argsort(-scores, kind="stable") if counts[i] >= args.min_count and words[i] != args.word]
    return [{"cosine": float(scores[i]), "word": words[i], "count": int(counts[i])} for i in keep[: args.top]]
