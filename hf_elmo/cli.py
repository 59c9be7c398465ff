"""The `hf-elmo` command line: embed files, find words by their context, convert and inspect models.

    hf-elmo embed sentences.txt vectors.hdf5             # AllenNLP `allennlp elmo` layout
    hf-elmo embed sentences.txt sentences.npy            # one mean vector per line
    hf-elmo similar --corpus corpus.txt --sentence "我们喝小米粥" --word 小米
    hf-elmo similar --corpus corpus.txt --word 小米 --types
    hf-elmo convert --from allennlp --options options.json --weights weights.hdf5 OUTPUT_DIR
    hf-elmo info
    hf-elmo pretrain ... / hf-elmo finetune ...          # handed to hf_elmo.pretrain / hf_elmo.finetune

Every command takes `--model NAME_OR_PATH` (default: the Chinese model shipped in the package).
`hf-elmo embed` also runs under `torchrun --nproc_per_node N` or `accelerate launch`: each process
embeds its own share of the lines and the first process merges them into one file, in input order.
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from .file_io import (
    DiskFullError,
    atomic_file,
    check_free_space,
    check_output_path,
    human_size,
    is_disk_full,
    read_input_bytes,
    reserve_space,
)

# Sub-commands that live in other modules and parse their own arguments.
_DELEGATED = {
    "corpus": ("hf_elmo.lm_data", "prepare a pretraining corpus: segment raw text, build the vocabulary"),
    "pretrain": ("hf_elmo.pretrain", "pretrain a biLM language model from text"),
    "finetune": ("hf_elmo.finetune", "fine-tune ELMo with a task head"),
}

# Lines per unit of work. Batches are formed inside a chunk, so a given chunk is always computed
# in the same batches however many processes share the file: outputs are bit-identical.
CHUNK_BATCHES = 16


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit status 2."""


# Input ---------------------------------------------------------------------------------------


def read_lines(path: str, blank_lines: str = "error", what: str = "input") -> list[str]:
    """The stripped lines of a UTF-8 text file (`-` = stdin), checked for encoding and blank lines.

    `blank_lines="error"` refuses blank lines (naming them, as `allennlp elmo` did), `"keep"` keeps them
    as sentences of zero words, `"skip"` drops them.
    """
    data = read_input_bytes(path, what)
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CliError(
                f"{path}: line {number} is not valid UTF-8 (byte 0x{raw[error.start]:02x} at byte offset {error.start}); "
                "convert the file to UTF-8 first"
            ) from None
        if number == 1:
            text = text.removeprefix("\ufeff")
        lines.append(text.strip())
    blank = [number for number, line in enumerate(lines, start=1) if not line]
    if blank and blank_lines == "error":
        shown = ", ".join(map(str, blank[:10])) + (f" and {len(blank) - 10} more" if len(blank) > 10 else "")
        raise CliError(
            f"{path}: blank line(s) at line {shown}; remove them, or pass --blank-lines keep "
            "(empty entries) or --blank-lines skip"
        )
    if blank_lines == "skip":
        lines = [line for line in lines if line]
    if not lines:
        raise CliError(f"{path}: no sentences in the {what} file")
    return lines


def split_lines(lines: Sequence[str], split: str, tokenizer) -> list[list[str]]:
    """Words of each line: the model's tokenizer (`model`) or whitespace-separated (`whitespace`)."""
    if split == "whitespace":
        return [line.split() for line in lines]
    return [tokenizer.tokenize(line) for line in lines]


# Output --------------------------------------------------------------------------------------


class Hdf5Writer:
    """The `allennlp elmo` layout: dataset `str(i)` per line, plus `sentence_to_index` (JSON in a (1,) string dataset)."""

    def __init__(self, path: str):
        import h5py

        self.file = h5py.File(path, "w")

    def write(self, index: int, array) -> None:
        self.file.create_dataset(str(index), array.shape, dtype="float32", data=array)

    def close(self, sentence_to_index: dict[str, str] | None) -> None:
        import h5py

        if sentence_to_index is not None:
            dataset = self.file.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))
            dataset[0] = json.dumps(sentence_to_index, ensure_ascii=False)
        self.file.close()


class NpyWriter:
    """One `.npy` array `(lines, 2P)` (or `(lines, L + 1, 2P)`), filled row by row through a memory map whose
    disk space is allocated up front (a full disk is then an error here, not a SIGBUS mid-way)."""

    def __init__(self, path: str, shape: tuple[int, ...]):
        import numpy as np

        self.array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
        reserve_space(path, os.path.getsize(path), "the .npy output")

    def write(self, index: int, array) -> None:
        self.array[index] = array

    def close(self, sentence_to_index=None) -> None:
        self.array.flush()
        del self.array


# Distributed runs ----------------------------------------------------------------------------


class Distributed:
    """Rank and world size from torchrun / accelerate (`RANK`, `WORLD_SIZE`); gloo for the barrier."""

    def __init__(self):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.started_here = False
        if self.world_size > 1:
            import torch.distributed as dist

            if not dist.is_initialized():
                dist.init_process_group("gloo")
                self.started_here = True

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()

    def broadcast(self, value):
        if self.world_size == 1:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if self.started_here:
            import torch.distributed as dist

            dist.destroy_process_group()


# Model loading --------------------------------------------------------------------------------


def make_embedder(args, distributed: Distributed | None = None):
    import torch
    from transformers.utils import logging as hf_logging

    from .embedder import Embedder

    hf_logging.disable_progress_bar()
    device = args.device
    if device is None and torch.cuda.is_available():
        device = f"cuda:{distributed.local_rank}" if distributed else "cuda"
    return Embedder(args.model, device=device or "cpu", dtype=args.dtype, batch_size=args.batch_size, progress=False)


def add_model_arguments(parser: argparse.ArgumentParser, batch: bool = True) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", help="model folder or Hub id; 'default' or no --model: the Chinese model shipped with hf-elmo")
    group.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if available)")
    group.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], help="compute dtype (default float32)")
    if batch:
        group.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")


def add_text_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--split",
        choices=["model", "whitespace"],
        default="model",
        help="how a line becomes words: the model's tokenizer (default; jieba for Chinese) or whitespace "
        "only, for text that is already segmented (what `allennlp elmo` did)",
    )


# embed -----------------------------------------------------------------------------------------


def _shard_chunks(num_lines: int, chunk_size: int, rank: int, world_size: int) -> list[range]:
    chunks = [range(start, min(start + chunk_size, num_lines)) for start in range(0, num_lines, chunk_size)]
    return chunks[rank::world_size]


def _embed_chunks(embedder, word_lists, chunks, layers, output_format, progress) -> Iterator[tuple[int, object]]:
    """(line index, float32 array) for every line of `chunks`, in increasing line order."""
    from tqdm.auto import tqdm

    total = sum(len(chunk) for chunk in chunks)
    with tqdm(total=total, unit="sent", disable=not progress, desc="embedding") as bar:
        for chunk in chunks:
            chunk_words = [word_lists[i] for i in chunk]
            if output_format == "npy":
                vectors = embedder.sentence_vectors(chunk_words, layers=layers, progress=False)
                arrays = [vectors[row] for row in range(len(chunk))]
            else:
                arrays = embedder.embed(chunk_words, layers=layers, progress=False)
            for offset, array in enumerate(arrays):
                yield chunk.start + offset, array
            bar.update(len(chunk))


# HDF5 bookkeeping per dataset (object header, B-tree entry) and per file, on top of the float32 values.
_HDF5_BYTES_PER_DATASET = 2048
_HDF5_BYTES_PER_FILE = 64 * 1024


def _output_bytes(word_lists, row_shape, output_format, sentence_to_index) -> int:
    """About how many bytes the embed output takes, to refuse a disk without that much room up front."""
    values_per_word = 1
    for size in row_shape:
        values_per_word *= size
    if output_format == "npy":
        return 128 + 4 * values_per_word * len(word_lists)
    words = sum(len(words) for words in word_lists)
    index = len(json.dumps(sentence_to_index, ensure_ascii=False).encode("utf-8")) if sentence_to_index else 0
    return 4 * values_per_word * words + _HDF5_BYTES_PER_DATASET * len(word_lists) + index + _HDF5_BYTES_PER_FILE


def _write_embeddings(writer, rows, sentence_to_index, output: str, remaining_bytes: int) -> None:
    """Write every (index, array) of `rows`, then close. HDF5 cannot recover from a write that fails on a full
    disk (its later flushes crash the process), so before each array the free space is checked against what
    is still to come (and the writer closed only when it is consistent)."""
    try:
        for index, array in rows:
            if isinstance(writer, Hdf5Writer):
                check_free_space(output, remaining_bytes, f"the rest of {output}")
                remaining_bytes -= 4 * array.size + _HDF5_BYTES_PER_DATASET
            writer.write(index, array)
        writer.close(sentence_to_index)
    except DiskFullError as error:
        raise CliError(f"{error}; no output was written") from None
    except (OSError, RuntimeError) as error:
        if is_disk_full(error):
            raise CliError(f"the disk holding {output} is full; no output was written") from None
        raise


def command_embed(args) -> int:
    output_format = args.format or ("npy" if args.output.lower().endswith(".npy") else "hdf5")
    layers = args.layers or ("average" if output_format == "npy" else "all")
    if args.output == "-":
        raise CliError("embeddings are written to a file, not to standard output: give a file name")
    if args.forget_sentences and output_format == "npy":
        raise CliError("--forget-sentences applies to hdf5 output (its sentence_to_index dataset); .npy has none")
    check_output_path(args.output, args.overwrite)
    lines = read_lines(args.input, args.blank_lines)
    distributed = Distributed()
    try:
        embedder = make_embedder(args, distributed)
        from .embedder import check_layers

        try:
            layers = check_layers(layers, embedder.num_layers)
        except (TypeError, ValueError) as error:
            raise CliError(str(error)) from None
        word_lists = split_lines(lines, args.split, embedder.tokenizer)
        chunk_size = args.batch_size * CHUNK_BATCHES
        progress = not args.no_progress and distributed.is_main and sys.stderr.isatty()
        sentence_to_index = None
        if output_format == "hdf5" and not args.forget_sentences:
            sentence_to_index = {line: str(index) for index, line in enumerate(lines)}  # later duplicates win
        row_shape = ((embedder.num_layers,) if layers == "all" else ()) + (embedder.dim,)

        output_bytes = _output_bytes(word_lists, row_shape, output_format, sentence_to_index)
        try:
            check_free_space(args.output, output_bytes, args.output)
        except DiskFullError as error:
            raise CliError(str(error)) from None

        def open_writer(path):
            try:
                return NpyWriter(path, (len(lines),) + row_shape) if output_format == "npy" else Hdf5Writer(path)
            except DiskFullError as error:
                raise CliError(str(error)) from None

        if distributed.world_size == 1:
            with atomic_file(args.output, args.overwrite) as temporary:
                rows = _embed_chunks(embedder, word_lists, _shard_chunks(len(lines), chunk_size, 0, 1), layers, output_format, progress)
                _write_embeddings(open_writer(temporary), rows, sentence_to_index, args.output, output_bytes)
        else:
            _embed_distributed(args, embedder, word_lists, chunk_size, layers, output_format, progress,
                               distributed, open_writer, sentence_to_index)
    finally:
        distributed.close()
    if distributed.is_main:
        print(f"wrote {args.output}: {len(lines)} sentences, layers={layers}, dim={embedder.dim}", file=sys.stderr)
    return 0


def _embed_distributed(args, embedder, word_lists, chunk_size, layers, output_format, progress,
                       distributed, open_writer, sentence_to_index) -> None:
    """Each rank writes its chunks to a shard file; after a barrier rank 0 merges them in line order."""
    import h5py

    folder = os.path.dirname(os.path.abspath(args.output))
    run_folder = distributed.broadcast(
        tempfile.mkdtemp(prefix=f".{os.path.basename(args.output)}.shards.", dir=folder) if distributed.is_main else None
    )
    try:
        shard_path = os.path.join(run_folder, f"rank{distributed.rank}.hdf5")
        with h5py.File(shard_path, "w") as shard:
            chunks = _shard_chunks(len(word_lists), chunk_size, distributed.rank, distributed.world_size)
            for index, array in _embed_chunks(embedder, word_lists, chunks, layers, output_format, progress):
                shard.create_dataset(str(index), data=array)
        distributed.barrier()  # every shard is complete
        if distributed.is_main:
            shards = [h5py.File(os.path.join(run_folder, f"rank{rank}.hdf5"), "r") for rank in range(distributed.world_size)]
            try:
                with atomic_file(args.output, args.overwrite) as temporary:
                    rows = (
                        (index, shards[(index // chunk_size) % distributed.world_size][str(index)][...])
                        for index in range(len(word_lists))
                    )
                    _write_embeddings(open_writer(temporary), rows, sentence_to_index, args.output, 0)
            finally:
                for shard in shards:
                    shard.close()
        distributed.barrier()  # the output exists before any rank reports success
    finally:
        if distributed.is_main:
            import shutil

            shutil.rmtree(run_folder, ignore_errors=True)


# similar ---------------------------------------------------------------------------------------


def _normalise(matrix):
    import numpy as np

    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _query_vector(embedder, args):
    """The contextual vector of `--word` in `--sentence` (occurrence `--occurrence`)."""
    words = split_lines([args.sentence], args.split, embedder.tokenizer)[0]
    positions = [i for i, word in enumerate(words) if word == args.word]
    if not positions:
        raise CliError(f"--word {args.word!r} is not one of the words of --sentence: {' '.join(words)}")
    if not 1 <= args.occurrence <= len(positions):
        raise CliError(f"--occurrence {args.occurrence}: {args.word!r} occurs {len(positions)} time(s) in the sentence")
    vectors = embedder.embed([words], layers=args.layer)[0]
    return vectors[positions[args.occurrence - 1]]


def command_similar(args) -> int:

    from .embedder import check_layers

    if args.layer == "all":
        raise CliError("--layer all gives several vectors per word; choose top, average, mix or a layer index")
    if not args.types and not args.sentence:
        given = "--sentence is empty: give" if args.sentence is not None else "give"
        raise CliError(f"{given} --sentence (find similar occurrences) or --types (nearest word types)")
    if args.top < 1:
        raise CliError(f"--top must be >= 1, got {args.top}")
    if args.min_count < 1:
        raise CliError(f"--min-count must be >= 1, got {args.min_count}")
    lines = read_lines(args.corpus, "skip", what="corpus")
    embedder = make_embedder(args)
    try:
        args.layer = check_layers(args.layer, embedder.num_layers)
    except (TypeError, ValueError) as error:
        raise CliError(str(error)) from None
    word_lists = split_lines(lines, args.split, embedder.tokenizer)
    query = _query_vector(embedder, args) if args.sentence else None
    progress = not args.no_progress and sys.stderr.isatty()
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
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
    elif args.types:
        for rank, item in enumerate(results, start=1):
            print(f"{rank:3d}  {item['cosine']:.4f}  {item['word']}  ({item['count']} occurrences)")
    else:
        for rank, item in enumerate(results, start=1):
            words = list(item["words"])
            words[item["position"]] = f"【{words[item['position']]}】"
            print(f"{rank:3d}  {item['cosine']:.4f}  {item['word']}  line {item['line']}: {' '.join(words)}")
    return 0


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
            raise CliError(f"--word {args.word!r} does not occur in the corpus (as split by --split {args.split})")
        query = sums[ids[args.word]] / counts[ids[args.word]]
    words = list(ids)
    means = sums[: len(words)] / np.maximum(counts[: len(words)], 1)[:, None]
    scores = _normalise(means) @ _normalise(np.asarray(query, dtype=np.float64))
    keep = [i for i in np.argsort(-scores, kind="stable") if counts[i] >= args.min_count and words[i] != args.word]
    return [{"cosine": float(scores[i]), "word": words[i], "count": int(counts[i])} for i in keep[: args.top]]


# convert ---------------------------------------------------------------------------------------


# The options each direction of `convert` reads; any other one given is a mistake worth naming.
_CONVERT_OPTIONS = {
    "--from allennlp": ("options", "weights", "segmenter"),
    "--from elmoformanylangs": ("model_dir", "config_path", "segmenter"),
    "--to allennlp": ("model",),
}


def command_convert(args) -> int:
    direction = "--to allennlp" if args.to == "allennlp" else f"--from {args.source}"
    unused = [
        "--" + name.replace("_", "-")
        for name in dict.fromkeys(name for names in _CONVERT_OPTIONS.values() for name in names)
        if getattr(args, name) and name not in _CONVERT_OPTIONS[direction]
    ]
    if unused:
        raise CliError(f"{', '.join(unused)}: not used with {direction}")
    if args.to == "allennlp":
        if not args.model:
            raise CliError("--to allennlp needs --model (the hf-elmo folder to export)")
        from .bilm_format import export_folder_to_bilm

        export_folder_to_bilm(args.model, args.output, overwrite=args.overwrite)
    elif args.source == "allennlp":
        if not (args.options and args.weights):
            raise CliError("--from allennlp needs --options options.json and --weights weights.hdf5")
        from .bilm_format import convert_bilm_to_folder

        tokenizer_kwargs = {"segmenter": args.segmenter} if args.segmenter else None
        convert_bilm_to_folder(args.options, args.weights, args.output, overwrite=args.overwrite,
                               tokenizer_kwargs=tokenizer_kwargs)
    else:
        if not args.model_dir:
            raise CliError("--from elmoformanylangs needs --model-dir (the folder with config.json, char.dic, *.pkl)")
        try:
            module = importlib.import_module("hf_elmo.elmoformanylangs_format")
        except ModuleNotFoundError as error:
            if error.name != "hf_elmo.elmoformanylangs_format":
                raise
            raise CliError("this hf-elmo has no ELMoForManyLangs converter (hf_elmo.elmoformanylangs_format)") from None
        convert = getattr(module, "convert_elmoformanylangs_to_folder", None)
        if convert is None:
            raise CliError("hf_elmo.elmoformanylangs_format has no convert_elmoformanylangs_to_folder()")
        kwargs = {"config_path": args.config_path} if args.config_path else {}
        if args.segmenter:
            kwargs["tokenizer_kwargs"] = {"segmenter": args.segmenter}
        convert(args.model_dir, args.output, overwrite=args.overwrite, **kwargs)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


# info ------------------------------------------------------------------------------------------


def model_info(embedder) -> dict:
    model, config = embedder.model, embedder.config
    folder = embedder.name if os.path.isdir(str(embedder.name)) else None
    size = sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file()) if folder else None
    tokenizer = embedder.tokenizer
    lm_vocab = getattr(config, "lm_vocab_size", 0) or 0
    return {
        "model": str(embedder.name),
        "size_on_disk_bytes": size,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "dtype": str(model.dtype).removeprefix("torch."),
        "output_layers": embedder.num_layers,
        "layer_dim": embedder.dim,
        "lstm_layers": config.num_lstm_layers,
        "lstm_cell_dim": config.lstm_cell_dim,
        "projection_dim": config.projection_dim,
        "char_cnn_filters": config.char_cnn_filters,
        "highway_layers": config.num_highway_layers,
        "max_characters_per_token": config.max_characters_per_token,
        "character_vocabulary": config.char_vocab_size,
        "character_scheme": getattr(config, "char_scheme", "bytes"),
        "word_vocabulary": getattr(config, "word_vocab_size", 0) or 0,
        "lm_output_vocabulary": int(lm_vocab),
        "segmenter": getattr(tokenizer, "chinese_segmentation", getattr(tokenizer, "segmenter", None)),
    }


def command_info(args) -> int:
    info = model_info(make_embedder(args))
    if args.json:
        print(json.dumps(info, ensure_ascii=False, indent=1))
        return 0
    size = info["size_on_disk_bytes"]
    filters = ", ".join(f"{count}x{width}" for width, count in info["char_cnn_filters"])
    words = f"{info['word_vocabulary']:,} words (word embedding)" if info["word_vocabulary"] else "none: words are spelled from characters, any word works"
    print(f"model:        {info['model']}" + (f"  ({human_size(size)} on disk)" if size is not None else ""))
    print(f"parameters:   {info['parameters']:,} ({info['dtype']})")
    print(f"layers:       {info['output_layers']} outputs (character CNN + {info['lstm_layers']} biLSTM), each {info['layer_dim']}-dim")
    print(f"biLSTM:       cell {info['lstm_cell_dim']}, projection {info['projection_dim']} per direction")
    print(f"char CNN:     filters {filters}; {info['highway_layers']} highway; {info['max_characters_per_token']} chars/word")
    print(f"characters:   {info['character_vocabulary']} ids ({info['character_scheme']} scheme)")
    print(f"word vocab:   {words}")
    if info["lm_output_vocabulary"]:
        print(f"LM softmax:   {info['lm_output_vocabulary']:,} words (pretraining head)")
    print(f"segmentation: {info['segmenter']}")
    return 0


# the parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-elmo",
        description="ELMo contextual word vectors: embed text, find words by context, convert and inspect models.",
        epilog="Run `hf-elmo COMMAND --help` for a command's options.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    embed = commands.add_parser(
        "embed",
        help="embed a file of sentences (one per line) into hdf5 or .npy",
        description=(
            "Embed INPUT (UTF-8, one sentence per line, `-` for stdin) into OUTPUT.\n\n"
            "hdf5 output (default) has the `allennlp elmo` layout: dataset str(i) for line i (0-based) of shape\n"
            "(L+1, words, 2P) with --layers all, (words, 2P) otherwise, plus `sentence_to_index`: a JSON\n"
            "object {line text: str(i)} stored as the single string of a (1,) dataset.\n"
            "OUTPUT ending in .npy (or --format npy): one mean word vector per line, shape (lines, 2P).\n\n"
            "Blank lines are refused with their line numbers (as `allennlp elmo` did) unless --blank-lines\n"
            "keep (a zero-word entry: shape (L+1, 0, 2P), a zero vector in .npy) or skip (dropped; indices\n"
            "then count non-blank lines). OUTPUT is written to a temporary file and renamed when complete.\n\n"
            "Scale out with `torchrun --nproc_per_node N -m hf_elmo.cli embed ...` (or accelerate launch):\n"
            "each process embeds a share of the lines; the file is identical to a one-process run."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    embed.add_argument("input", metavar="INPUT", help="UTF-8 text, one sentence per line (`-` = stdin)")
    embed.add_argument("output", metavar="OUTPUT", help="hdf5 file, or .npy for sentence vectors")
    embed.add_argument(
        "--layers",
        help="all | top | average | mix | a layer index: 0 = characters, 1..L = biLSTM layers, negative counts "
        "from the top (-1 = top; not ELMoForManyLangs' -1 = average) (default: all for hdf5, average for .npy)",
    )
    embed.add_argument("--format", choices=["hdf5", "npy"], help="output format (default: from OUTPUT's extension)")
    embed.add_argument("--blank-lines", choices=["error", "keep", "skip"], default="error",
                       help="what to do with blank lines (default: error, naming them)")
    embed.add_argument("--forget-sentences", action="store_true", help="hdf5: leave out the sentence_to_index dataset")
    embed.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    embed.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_text_arguments(embed)
    add_model_arguments(embed)
    embed.set_defaults(handler=command_embed)

    similar = commands.add_parser(
        "similar",
        help="find the words in a corpus whose contextual vectors are nearest to a word in a sentence",
        description=(
            "Occurrence mode (--sentence): rank every word occurrence in --corpus by the cosine between its\n"
            "contextual vector and that of --word in --sentence; --same-word keeps only occurrences of the\n"
            "same word (which uses of 小米 mean the grain, which the phone maker?).\n\n"
            "Type mode (--types): average each word type's vectors over all its occurrences in the corpus and\n"
            "list the word types nearest to --word's average (or to --word in --sentence, if given)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    similar.add_argument("--corpus", required=True, help="UTF-8 text, one sentence per line (blank lines ignored)")
    similar.add_argument("--word", required=True, help="the query word (must be one of the words after splitting)")
    similar.add_argument("--sentence", help="a sentence containing --word: the context of the query")
    similar.add_argument("--occurrence", type=int, default=1, help="which occurrence of --word in --sentence (default 1)")
    similar.add_argument("--types", action="store_true", help="rank word types by their mean vector instead of occurrences")
    similar.add_argument("--same-word", action="store_true", help="occurrence mode: only occurrences of --word itself")
    similar.add_argument("--min-count", type=int, default=2, help="type mode: ignore words seen fewer times (default 2)")
    similar.add_argument("--top", type=int, default=10, help="how many results (default 10)")
    similar.add_argument("--layer", default="top", help="top (default) | average | mix | a layer index")
    similar.add_argument("--json", action="store_true", help="print JSON instead of a table")
    similar.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_text_arguments(similar)
    add_model_arguments(similar)
    similar.set_defaults(handler=command_similar)

    convert = commands.add_parser(
        "convert",
        help="convert AllenNLP/bilm-tf or ELMoForManyLangs weights to an hf-elmo folder, or back",
        description=(
            "--from allennlp:         --options options.json --weights weights.hdf5 OUTPUT_DIR\n"
            "--from elmoformanylangs: --model-dir ZHS_MODEL_DIR [--config-path CNN_CONFIG.json] OUTPUT_DIR\n"
            "--to allennlp:           --model HF_ELMO_DIR OUTPUT_DIR  (writes options.json + weights.hdf5)\n"
            "The output folder is built under a temporary name and renamed when complete."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument("output", metavar="OUTPUT_DIR", help="folder to write (refused if it exists, see --overwrite)")
    direction = convert.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from", dest="source", choices=["allennlp", "elmoformanylangs"], help="source format")
    direction.add_argument("--to", choices=["allennlp"], help="export an hf-elmo folder to this format")
    convert.add_argument("--options", help="allennlp: options.json")
    convert.add_argument("--weights", help="allennlp: weights.hdf5 (bilm-tf dump_weights layout)")
    convert.add_argument("--model-dir", help="elmoformanylangs: the model folder")
    convert.add_argument("--config-path", help="elmoformanylangs: the model's CNN/LSTM config json, if not found")
    convert.add_argument("--model", help="--to allennlp: the hf-elmo folder to export")
    convert.add_argument(
        "--segmenter", choices=["auto", "jieba", "chars", "whitespace"],
        help="--from: how the saved tokenizer splits raw text (default auto; whitespace = as `allennlp elmo` did)",
    )
    convert.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")
    convert.set_defaults(handler=command_convert)

    info = commands.add_parser("info", help="show a model's size, layers, dimensions and vocabulary",
                               description="Show a model's size, parameters, layers, dimensions and vocabulary.")
    info.add_argument("--json", action="store_true", help="print JSON")
    add_model_arguments(info, batch=False)
    info.set_defaults(handler=command_info, batch_size=1)

    for name, (_, help_text) in _DELEGATED.items():
        commands.add_parser(name, help=help_text + f" (see `hf-elmo {name} --help`)", add_help=False)
    return parser


def _run_delegated(name: str, argv: list[str]) -> int:
    module_name = _DELEGATED[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        print(f"hf-elmo: error: `{name}` is not available in this installation ({module_name} is missing)", file=sys.stderr)
        return 2
    return module.main(argv) or 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _DELEGATED:
        return _run_delegated(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from .embedder import ModelNotFoundError

    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("hf-elmo: interrupted; no output was written", file=sys.stderr)
        return 130
    except (CliError, ModelNotFoundError, FileExistsError) as error:
        print(f"hf-elmo: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # bad files or arguments reported by the converters and loaders
        print(f"hf-elmo: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
