"""`hf-elmo embed`: a file of sentences -> contextual vectors in the `allennlp elmo` hdf5 layout or a .npy."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator

from ..utils.io import (
    DiskFullError,
    atomic_file,
    check_free_space,
    check_output_path,
    is_disk_full,
    output_lock,
    reserve_space,
    temporary_folder,
)
from .common import (
    add_model_arguments,
    add_text_arguments,
    batch_memory,
    check_input_file,
    check_model_folder,
    check_output_apart,
    check_user_dict,
    make_embedder,
    output_argument,
    read_lines,
    split_lines,
)
from .errors import CommandError

# Lines per unit of work. Batches are formed inside a chunk, so a given chunk is always computed
# in the same batches however many processes share the file: outputs are bit-identical.
CHUNK_BATCHES = 16


# A local folder's encoder loads as an ElmoBiLm (`common.make_embedder`); the loading registers the ELMo Auto classes
# only where AutoTokenizer is needed (`loading.load_tokenizer`).
REGISTERS_AUTO_CLASSES_ITSELF = True

HELP = "embed a file of sentences (one per line) into hdf5 or .npy"
DESCRIPTION = """Embed INPUT (UTF-8, one sentence per line, `-` for stdin) into OUTPUT.

hdf5 output (default) has the `allennlp elmo` layout: dataset str(i) for line i (0-based) of shape
(L+1, words, 2P) with --layers all, (words, 2P) otherwise, plus `sentence_to_index`: a JSON
object {line text: str(i)} stored as the single string of a (1,) dataset.
OUTPUT ending in .npy (or --format npy): one mean word vector per line, shape (lines, 2P).

Blank lines are refused with their line numbers (as `allennlp elmo` did) unless --blank-lines
keep (a zero-word entry: shape (L+1, 0, 2P), a zero vector in .npy) or skip (dropped; indices
then count non-blank lines). OUTPUT is written to a temporary file and renamed when complete.

Scale out with `torchrun --nproc_per_node N -m hf_elmo.cli embed ...` (or accelerate launch):
each process embeds a share of the lines; the file is identical to a one-process run."""


def add_arguments(parser) -> None:
    parser.add_argument("input", metavar="INPUT", help="UTF-8 text, one sentence per line (`-` = stdin)")
    parser.add_argument("output", metavar="OUTPUT", nargs="?",
                        help="hdf5 file, or .npy for sentence vectors; or give it as --output")
    parser.add_argument("--output", dest="output_option", metavar="OUTPUT", help="the same as OUTPUT")
    parser.add_argument(
        "--layers",
        help="all | top | average | mix | a layer index: 0 = characters, 1..L = biLSTM layers, negative counts "
        "from the top (-1 = top; not ELMoForManyLangs' -1 = average) (default: all for hdf5, average for .npy)",
    )
    parser.add_argument("--format", choices=["hdf5", "npy"], help="output format (default: from OUTPUT's extension)")
    parser.add_argument("--blank-lines", choices=["error", "keep", "skip"], default="error",
                       help="what to do with blank lines (default: error, naming them)")
    parser.add_argument("--forget-sentences", action="store_true", help="hdf5: leave out the sentence_to_index dataset")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_text_arguments(parser)
    add_model_arguments(parser)


class Hdf5Writer:
    """The `allennlp elmo` layout: dataset `str(i)` per line, plus `sentence_to_index` (JSON in a (1,) string dataset);
    and the words its rows belong to, `words/str(i)` (UTF-8 strings)."""

    def __init__(self, path: str, word_lists):
        import h5py

        self.file = h5py.File(path, "w")
        self.word_lists = word_lists
        self.words = self.file.create_group(WORDS_GROUP)

    def write(self, index: int, array) -> None:
        import h5py

        self.file.create_dataset(str(index), array.shape, dtype="float32", data=array)
        self.words.create_dataset(str(index), data=self.word_lists[index], shape=(len(self.word_lists[index]),),
                                  dtype=h5py.string_dtype())

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
# A variable-length string's global-heap entry and its reference, beside the UTF-8 bytes.
_HDF5_BYTES_PER_STRING = 32


def _output_bytes(word_lists, row_shape, output_format, sentence_to_index) -> int:
    """About how many bytes the embed output takes, to refuse a disk without that much room up front."""
    values_per_word = 1
    for size in row_shape:
        values_per_word *= size
    if output_format == "npy":
        return 128 + 4 * values_per_word * len(word_lists)
    index = len(json.dumps(sentence_to_index, ensure_ascii=False).encode("utf-8")) if sentence_to_index else 0
    return sum(_hdf5_line_bytes(words, values_per_word) for words in word_lists) + index + _HDF5_BYTES_PER_FILE


def _hdf5_line_bytes(words, values_per_word: int) -> int:
    """About how many bytes one line takes in the hdf5 output: its vectors and its words, two datasets."""
    text = sum(len(word.encode("utf-8")) + _HDF5_BYTES_PER_STRING for word in words)
    return 4 * values_per_word * len(words) + text + 2 * _HDF5_BYTES_PER_DATASET


def _write_embeddings(writer, rows, sentence_to_index, output: str, remaining_bytes: int) -> None:
    """Write every (index, array) of `rows`, then close. HDF5 cannot recover from a write that fails on a full
    disk (its later flushes crash the process), so before each array the free space is checked against what
    is still to come (and the writer closed only when it is consistent)."""
    import numpy as np

    bad_values, bad_lines = 0, []
    try:
        for index, array in rows:
            bad = array.size - int(np.count_nonzero(np.isfinite(array)))
            if bad:  # counted through to the end, and the output refused before it is moved into place
                bad_values += bad
                bad_lines.append(index)
            if isinstance(writer, Hdf5Writer):
                check_free_space(output, remaining_bytes, f"the rest of {output}")
                words = writer.word_lists[index]
                remaining_bytes -= _hdf5_line_bytes(words, array.size // max(len(words), 1))
            writer.write(index, array)
        if bad_values:
            writer.close(None)
            shown = ", ".join(str(index + 1) for index in bad_lines[:5]) + (" ..." if len(bad_lines) > 5 else "")
            raise CommandError(
                f"the model's vectors are not finite: {bad_values:,} values are NaN or infinite, in {len(bad_lines):,} "
                f"sentence(s) (number {shown}; weights too large for float32?); no output was written"
            )
        writer.close(sentence_to_index)
    except DiskFullError as error:
        raise CommandError(f"{error}; no output was written") from None
    except (OSError, RuntimeError) as error:
        if is_disk_full(error):
            raise CommandError(f"the disk holding {output} is full; no output was written") from None
        raise


# The group of one string dataset per line: the words of the rows of that line's vectors.
WORDS_GROUP = "words"

OUTPUT_EXTENSIONS = {".npy": "npy", ".hdf5": "hdf5", ".h5": "hdf5"}


def _output_format(args) -> str:
    named_format = OUTPUT_EXTENSIONS.get(os.path.splitext(args.output.lower())[1])
    if args.format and named_format and args.format != named_format:
        raise CommandError(f"--format {args.format} but {args.output} is named as {named_format}: rename one of them")
    return args.format or named_format or "hdf5"


def check(args) -> None:
    args.output = output_argument(args, "OUTPUT")
    if args.output == "-":
        raise CommandError("embeddings are written to a file, not to standard output: give a file name")
    if args.forget_sentences and _output_format(args) == "npy":
        raise CommandError("--forget-sentences applies to hdf5 output (its sentence_to_index dataset); .npy has none")
    check_output_apart(args.output, "OUTPUT", models=[("--model", args.model)],
                       files=[("INPUT", args.input), ("--user-dict", args.user_dict)])
    check_output_path(args.output, args.overwrite)
    check_input_file(args.input)
    check_user_dict(args, args.split == "whitespace", "--split whitespace")
    check_model_folder(args.model)


def run(args) -> int:
    output_format = _output_format(args)
    layers = args.layers or ("average" if output_format == "npy" else "all")
    # Only the process that writes the output holds its lock (the other ranks of a torchrun write shards).
    with output_lock(args.output) if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext():
        return _embed_into(args, output_format, layers)


def _embed_into(args, output_format: str, layers) -> int:
    lines = read_lines(args.input, args.blank_lines, max_line_bytes=args.max_line_bytes)
    distributed = Distributed()
    try:
        embedder = make_embedder(args, distributed)
        from ..integrations.embedder import check_layers

        try:
            layers = check_layers(layers, embedder.num_layers)
        except (TypeError, ValueError) as error:
            raise CommandError(str(error)) from None
        word_lists = split_lines(lines, args.split, embedder.tokenizer, args.max_words_per_line, args.input)
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
            raise CommandError(str(error)) from None

        def open_writer(path):
            try:
                return NpyWriter(path, (len(lines),) + row_shape) if output_format == "npy" else Hdf5Writer(path, word_lists)
            except DiskFullError as error:
                raise CommandError(str(error)) from None

        if distributed.world_size == 1:
            with atomic_file(args.output, args.overwrite) as temporary, batch_memory(args):
                rows = _embed_chunks(embedder, word_lists, _shard_chunks(len(lines), chunk_size, 0, 1), layers, output_format, progress)
                _write_embeddings(open_writer(temporary), rows, sentence_to_index, args.output, output_bytes)
        else:
            with batch_memory(args):
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

    run_folder = distributed.broadcast(
        str(temporary_folder(os.path.abspath(args.output), "shards")) if distributed.is_main else None
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
