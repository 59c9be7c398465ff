"""Export a pretraining run as the shipped default model (encoder only) and measure it.

Writes the folder atomically, records the exact perplexity on the held-out People's Daily
sentences, and fills model_cards/results/elmo-zh-small.json for the model card.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from hf_elmo import ElmoForPreTraining, ElmoModel, ElmoTokenizer
from hf_elmo.pretraining.data import LanguageModelCollator, LineDataset
from hf_elmo.pretraining.run import exact_perplexity
from hf_elmo.utils.io import AtomicDirectory

REPO = Path(__file__).resolve().parents[2]
DETAILS = REPO / "model_cards" / "results" / "elmo-zh-small.details.json"
STAGE_FIELDS = ("global_step", "train_seconds_this_run", "resumed_from", "initialized_from", "train_loss", "eval_perplexity")


def previous_stage(details: dict) -> dict:
    """The single stage of a details file written before stages were recorded."""
    return {
        "global_step": details.get("training_steps"),
        "train_seconds_this_run": details.get("train_seconds"),
        "resumed_from": None,
        "initialized_from": None,
        "train_loss": details.get("train_loss_sampled_softmax"),
        "eval_perplexity": details.get("dev1000_perplexity"),
        "output_dir": "(previously shipped elmo-zh-small)",
    }


def without_remote_code(folder: Path) -> None:
    """Issue 34: the shipped folder holds weights, config and tokenizer files, no code; `save_pretrained` of a copy
    writes the remote-code files (and their auto_map) where they are needed."""
    for code in folder.glob("*.py"):
        code.unlink()
    for name in ("config.json", "tokenizer_config.json"):
        saved = json.loads((folder / name).read_text(encoding="utf-8"))
        saved.pop("auto_map", None)
        (folder / name).write_text(json.dumps(saved, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def newest_trainer_state(run: Path) -> dict:
    newest = max(run.glob("checkpoint-*/trainer_state.json"), key=lambda p: int(p.parent.name.split("-")[1]), default=None)
    return json.loads(newest.read_text(encoding="utf-8")) if newest else {}


def perplexity(run: Path, corpus: Path, batch_size: int = 64) -> dict:
    model = ElmoForPreTraining.from_pretrained(run).eval()
    collator = LanguageModelCollator(ElmoTokenizer.from_pretrained(run), model.config.lm_vocab)
    loader = torch.utils.data.DataLoader(LineDataset(corpus), batch_size=batch_size, collate_fn=collator)
    return exact_perplexity(model, loader)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True, type=Path, help="pretraining output folder")
    parser.add_argument("--corpus", required=True, type=Path, help="folder with dev.txt (held-out People's Daily)")
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--skip-perplexity", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)

    summary = json.loads((args.run / "pretraining_summary.json").read_text(encoding="utf-8"))
    state = newest_trainer_state(args.run)
    encoder = ElmoModel.from_pretrained(args.run)
    # The shipped folder is the encoder only: the softmax's word list is not needed to embed text.
    encoder.config.lm_vocab = None
    tokenizer = ElmoTokenizer.from_pretrained(args.run)
    with AtomicDirectory(args.output, overwrite=args.overwrite) as folder:
        encoder.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        without_remote_code(folder)

    # A run continued from another (`--init-from`) is one stage of the model's training: list them all.
    # A run continued from the previously shipped default ('default') inherits that model's stages,
    # which its details file records (its run folders are gone).
    previous = json.loads(DETAILS.read_text(encoding="utf-8")) if DETAILS.exists() else {}
    stages, run = [], args.run
    while run is not None:
        if run == "default" or not (Path(run) / "pretraining_summary.json").exists():
            stages[:0] = previous.get("stages") or [previous_stage(previous)]
            break
        stage = json.loads((Path(run) / "pretraining_summary.json").read_text(encoding="utf-8"))
        stage_state = newest_trainer_state(Path(run))
        per_step = stage_state.get("train_batch_size", 64) * stage.get("world_size", 1)
        stages.insert(0, {key: stage.get(key) for key in STAGE_FIELDS} | {"sentences_per_step": per_step, "output_dir": str(run)})
        run = stage.get("initialized_from")
    details = {
        "stages": stages,
        "training_steps": sum(stage["global_step"] for stage in stages),
        "training_sentences_seen": sum(stage["global_step"] * stage.get("sentences_per_step", 64) for stage in stages),
        "train_loss_sampled_softmax": round(summary["train_loss"], 4),
        "dev1000_perplexity": round(summary["eval_perplexity"], 2),
        "dev1000_forward_perplexity": round(summary["eval_forward_perplexity"], 2),
        "dev1000_backward_perplexity": round(summary["eval_backward_perplexity"], 2),
        "parameters_encoder": summary["parameters_encoder"],
        "vocabulary_size": summary["vocabulary_size"],
        "log_history_tail": state["log_history"][-3:],
    }
    if not args.skip_perplexity:
        # The first 1,000 sentences of People's Daily's test split: never seen in pretraining.
        test = perplexity(args.run, args.corpus / "test1000.txt")
        details["test1000_perplexity"] = round(test["perplexity"], 2)
        details["test1000_tokens"] = int(test["tokens"])
    print(json.dumps(details, indent=2, ensure_ascii=False))
    temporary = DETAILS.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(details, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(DETAILS)


if __name__ == "__main__":
    main()
