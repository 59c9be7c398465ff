"""Pretraining an ELMo biLM on `transformers.Trainer`: the work behind `hf-elmo pretrain` (its options are
`PretrainingArguments`, hf_elmo/pretraining/options.py; its usage is in hf_elmo/cli/pretrain.py). Runs unchanged
under torchrun (DDP; gloo on CPU), resumes from the newest complete checkpoint, and writes the final model, tokenizer
and `pretraining_summary.json`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

from ..loading import resolve_model_name
from ..models.elmo.configuration_elmo import ElmoConfig
from ..models.elmo.tokenization_elmo import ElmoTokenizer
from ..utils.checkpoints import (  # noqa: F401  (TRAIN_LOSS_FILE, check_checkpoint_readable, weight_names: public here too)
    RUN_IDENTITY_FILE,
    TRAIN_LOSS_FILE,
    check_checkpoint_readable,
    check_same_run,
    checkpoint_loss_sum,
    checkpoint_step,
    last_complete_checkpoint,
    read_json_object,
    read_run_identity,
    weight_names,
    write_run_identity,
)
from ..utils.interruption import SaveOnInterrupt, TrainingInterrupted, next_checkpoint_step
from ..utils.io import atomic_write_text, check_output_folder, load_json_file
from .data import (
    SPECIAL_WORDS,
    LanguageModelCollator,
    LineDataset,
    build_character_vocabulary,
    build_vocabulary,
    check_corpus_file,
    check_vocabulary_limits,
    load_vocabulary,
    read_corpus_lines,
    save_vocabulary,
)
from .language_model import ElmoForPreTraining
from .options import (
    ARCHITECTURE_DEFAULTS,
    ARCHITECTURE_OPTIONS,
    CONFIG_OPTIONS,
    OPTIONS_ADDED_LATER,
    PretrainingArguments,
    config_field,
    flag,
    run_identity,
    trainer_options,
)
from .trainer import LanguageModelTrainer, TimeBudget, exact_perplexity  # noqa: F401 (exact_perplexity: public)

# Fields that define the architecture: a checkpoint must agree on all of them to be resumed. Those the architecture
# options set, then those no option sets today (named once if an option comes to set one).
ARCHITECTURE_FIELDS = tuple(dict.fromkeys((
    *(config_field(name).name for name in ARCHITECTURE_OPTIONS),
    "char_vocab_size",
    "char_cnn_activation",
    "lm_vocab",
)))


def check_arguments(options: PretrainingArguments) -> None:
    """Refuse out-of-range numeric options with one ValueError naming them all, before anything is written.

    (The model options are checked by `ElmoConfig` itself, also before anything is written.)"""
    problems = options.problems()
    try:
        check_vocabulary_limits(options.min_count, options.max_vocab, ("--min-count", "--max-vocab"))
    except ValueError as error:
        problems.append(str(error))
    if problems:
        raise ValueError("; ".join(problems))


def check_output_dir(output_dir: Path) -> None:
    """Refuse, before anything is written, an --output-dir that is a file, lies below one, or cannot be written."""
    check_output_folder(output_dir, "--output-dir")


def resolve_architecture(options: PretrainingArguments) -> None:
    """Fill in the architecture options not given: from `--init-from`'s config.json when there is one, else their
    defaults. A given option that disagrees with that config is refused, naming both values."""
    saved = {}
    if options.init_from:
        path = Path(resolve_model_name(options.init_from)) / "config.json"
        if path.is_file():  # else initialize_from says what is wrong with the folder
            saved = read_json_object(path, f"--init-from {options.init_from}'s config")
    for name in ARCHITECTURE_OPTIONS:
        config = config_field(name)
        given = getattr(options, name)
        if given is None or given is False:  # not given (a switch: not switched on)
            setattr(options, name, config.to_option(saved[config.name]) if config.name in saved else
                    ARCHITECTURE_DEFAULTS[name])
        elif config.name in saved and config.from_option(given) != saved[config.name]:
            shown = f"{flag(name)} given" if given is True else f"{flag(name)} {given}"
            raise ValueError(f"{shown}, but --init-from {options.init_from} has {config.name} "
                             f"{saved[config.name]!r}: leave the architecture options out to take the model's, or "
                             "give its values")


def _initial_model_char_vocab(folder: str) -> dict | None:
    """The character vocabulary of the model `--init-from` names (None: none to read, or the byte scheme)."""
    path = Path(resolve_model_name(folder)) / "char_vocab.json"
    return load_json_file(path, "character vocabulary file") if path.is_file() else None


def _tokenizer_from_options(options: PretrainingArguments, output_dir: Path) -> ElmoTokenizer:
    """The byte scheme needs nothing; the dictionary scheme's character vocabulary is the run's own
    char_vocab.json when resuming, that of the `--init-from` model (its character embeddings are rows of that
    vocabulary), else built from the training files."""
    if options.char_scheme == "bytes":
        return ElmoTokenizer(max_characters_per_token=options.max_characters_per_token, segmenter=options.segmenter)
    saved = output_dir / "char_vocab.json"
    initial = _initial_model_char_vocab(options.init_from) if options.init_from else None
    if saved.is_file() and not options.no_resume:
        char_vocab = load_json_file(saved, "character vocabulary file")
    elif initial is not None:
        char_vocab = initial
    else:
        char_vocab = build_character_vocabulary(options.train_file, min_count=options.char_min_count)
    return ElmoTokenizer(
        max_characters_per_token=options.max_characters_per_token, segmenter=options.segmenter,
        char_scheme="dictionary", char_vocab=char_vocab,
    )


def _config_from_options(options: PretrainingArguments, vocabulary: list[str], tokenizer: ElmoTokenizer) -> ElmoConfig:
    values = {}
    for name in CONFIG_OPTIONS:
        config = config_field(name)
        values[config.name] = config.from_option(getattr(options, name))
    if tokenizer.char_scheme == "dictionary":
        values.update({
            "char_vocab_size": max(tokenizer.char_vocab.values()) + 1,
            "bos_char_ids": tokenizer.word_to_char_ids("<bos>"),
            "eos_char_ids": tokenizer.word_to_char_ids("<eos>"),
        })
    try:
        return ElmoConfig(**values, lm_vocab=vocabulary)
    except ValueError as error:  # the config names its fields; the user gave options
        message = str(error)
        for name in CONFIG_OPTIONS:
            message = re.sub(rf"\b{config_field(name).name}\b", flag(name), message)
        raise ValueError(message) from None


def check_checkpoint_compatible(
    checkpoint: str | os.PathLike,
    config: ElmoConfig,
    fields: tuple[str, ...] = ARCHITECTURE_FIELDS,
    advice: str = "use another --output-dir or --no-resume",
) -> dict:
    """Refuse a checkpoint whose architecture differs from the requested one; returns its saved config.

    `advice` ends the message about a differing architecture (what the user can do about it)."""
    saved = read_json_object(Path(checkpoint) / "config.json", "checkpoint config")
    if saved.get("model_type") != "elmo":
        raise ValueError(f"{checkpoint} is not an ELMo checkpoint (model_type={saved.get('model_type')!r})")
    wanted = config.to_dict()
    different = [field for field in fields if saved.get(field) != wanted.get(field)]
    if different:
        raise ValueError(
            f"{checkpoint} was trained with another architecture (differs in {', '.join(different)}); {advice}"
        )
    return saved


def initialize_from(model: ElmoForPreTraining, folder: str) -> str:
    """Load the weights of `folder` into `model` for continued pretraining; returns what was loaded.

    A pretraining run with the same vocabulary gives encoder and softmax. An encoder-only folder (no
    `lm_vocab`: the shipped default, a converted AllenNLP model) or a run with another vocabulary gives
    the encoder; the softmax keeps its fresh initialisation, since its rows belong to other words."""
    folder = resolve_model_name(folder)
    if not Path(folder).is_dir():
        raise ValueError(f"--init-from {folder}: no such model folder ('default' names the shipped model)")
    encoder_fields = tuple(field for field in ARCHITECTURE_FIELDS if field != "lm_vocab")
    advice = "--init-from a model of the architecture asked for"
    saved = check_checkpoint_compatible(folder, model.config, encoder_fields, advice=advice)
    weights = Path(folder) / "model.safetensors"
    if not weights.is_file():
        raise ValueError(f"--init-from {folder} has no model.safetensors")
    try:
        has_softmax = "softmax.weight" in weight_names(weights)
    except ValueError as error:
        raise ValueError(f"--init-from {folder}: {error}") from None
    if has_softmax and saved.get("lm_vocab") == model.config.lm_vocab:
        model.load_state_dict(ElmoForPreTraining.from_pretrained(folder).state_dict())
        return "encoder and softmax"
    from ..loading import from_pretrained_noting_heads
    from ..models.elmo.modeling_elmo import ElmoModel

    encoder = from_pretrained_noting_heads(ElmoModel, folder).state_dict()
    # The layer mix is a downstream-task parameter, not part of what pretraining continues.
    encoder = {name: value for name, value in encoder.items() if not name.startswith("scalar_mixes.")}
    missing, unexpected = model.elmo.load_state_dict(encoder, strict=False)
    missing = [name for name in missing if not name.startswith("scalar_mixes.")]
    if missing or unexpected:
        raise ValueError(f"--init-from {folder}: weights do not fit (missing {missing}, unexpected {unexpected})")
    return "encoder (softmax starts fresh)"



def run(options: PretrainingArguments) -> int:
    """Pretrain with the `hf-elmo pretrain` options. Under torchrun every rank ends its process here."""
    from transformers.utils import logging as transformers_logging

    bars_were_on = transformers_logging.is_progress_bar_enabled()
    if options.disable_tqdm:  # also the bars transformers shows outside the Trainer (loading weights)
        transformers_logging.disable_progress_bar()
    data_parallel = False
    try:
        code = _run(options)
    except TrainingInterrupted as interruption:  # every rank stopped at one step, after the checkpoint was saved
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            raise
        if os.environ.get("RANK", "0") == "0":
            print(f"hf-elmo: interrupted; saved the checkpoint {interruption.checkpoint}; the same command resumes "
                  "the run from it", file=sys.stderr)
        code, data_parallel = 130, True
    finally:
        if bars_were_on:
            transformers_logging.enable_progress_bar()
    if data_parallel or (torch.distributed.is_available() and torch.distributed.is_initialized()):
        _exit_data_parallel_rank(code)
    return code


def _exit_data_parallel_rank(code: int) -> None:
    """End a data-parallel rank once every rank is done, without tearing the process group down. Left to
    interpreter exit, gloo's teardown aborted a rank in about 1 run of 15 ("terminate called without an
    active exception", exit code -6), and destroying the group first hung in about 1 of 27; everything the
    run writes is complete (atomic renames, closed files) before the barrier."""
    torch.distributed.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def check_run_identity(output_dir: Path, options: PretrainingArguments) -> None:
    """Refuse to touch a folder that holds another run: with --no-resume any run (its checkpoints would later be
    resumed in place of this one), otherwise a run started with other options."""
    held = sorted(path.name for path in output_dir.glob("checkpoint-*")) if output_dir.is_dir() else []
    if (output_dir / "pretraining_summary.json").is_file():
        held.append("pretraining_summary.json")
    if not held:
        return
    shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
    if options.no_resume:
        raise ValueError(
            f"--no-resume: {output_dir} holds a run ({shown}); a later run of the same command would resume that "
            "run's checkpoints instead of this one's: give another --output-dir, or delete that folder first"
        )
    recorded = read_run_identity(output_dir)
    if recorded is not None:  # else a run from before identities were recorded
        check_same_run(output_dir, recorded, run_identity(options), lambda name: "--" + name.replace("_", "-"),
                       OPTIONS_ADDED_LATER)


def _checkpoint_to_resume(output_dir: Path, config, options) -> str | None:
    """The newest complete checkpoint of the run folder, checked readable and of this architecture; None with
    --no-resume or none there."""
    if not output_dir.is_dir() or options.no_resume:
        return None
    resume = last_complete_checkpoint(output_dir)
    if resume:
        check_checkpoint_readable(resume)
        check_checkpoint_compatible(resume, config)
    return resume


def _run(options) -> int:
    from transformers import set_seed

    # Every check that can fail runs before the first file is written, so a refused run leaves nothing behind.
    resolve_architecture(options)
    check_arguments(options)
    if options.threads:
        torch.set_num_threads(options.threads)
    output_dir = Path(options.output_dir)
    check_output_dir(output_dir)
    check_run_identity(output_dir, options)
    for path in options.train_file + ([options.dev_file] if options.dev_file else []):
        check_corpus_file(path)
    vocabulary = _vocabulary(options, output_dir)
    tokenizer = _tokenizer_from_options(options, output_dir)
    config = _config_from_options(options, vocabulary, tokenizer)
    train_parts = [LineDataset(path, max_words=options.max_words) for path in options.train_file]
    train_dataset = train_parts[0] if len(train_parts) == 1 else torch.utils.data.ConcatDataset(train_parts)
    dev_dataset = LineDataset(options.dev_file, max_words=options.max_words) if options.dev_file else None
    resume = _checkpoint_to_resume(output_dir, config, options)
    set_seed(options.seed)
    model = ElmoForPreTraining(config)
    initialized = None
    if options.init_from and resume is None:
        initialized = initialize_from(model, options.init_from)
        print(f"initialised the {initialized} from {options.init_from}", file=sys.stderr)
    _say_how_the_run_starts(output_dir, resume, options)  # once nothing more can be refused before training
    interruption = SaveOnInterrupt("pretraining")
    trainer = LanguageModelTrainer(
        group_by_length=options.group_by_length,
        resumed_loss_sum=checkpoint_loss_sum(resume) if resume else 0.0,
        model=model,
        args=_training_arguments(options, output_dir, dev_dataset is not None),
        train_dataset=train_dataset,
        eval_dataset=dev_dataset,
        data_collator=LanguageModelCollator(tokenizer, vocabulary),
        callbacks=[interruption] + ([TimeBudget(options.time_budget_minutes)] if options.time_budget_minutes else []),
    )
    if trainer.is_world_process_zero():
        output_dir.mkdir(parents=True, exist_ok=True)
        save_vocabulary(vocabulary, output_dir / "vocab.txt")
        if tokenizer.char_vocab is not None:
            atomic_write_text(output_dir / "char_vocab.json", json.dumps(tokenizer.char_vocab, ensure_ascii=False) + "\n")
        if resume is None:  # the options this run starts with; a resume is checked against them
            write_run_identity(output_dir, run_identity(options))
    summary = _train(trainer, model, output_dir, resume, options)
    interruption.raise_if_interrupted(output_dir)  # a checkpoint saved on Ctrl-C / SIGTERM: the run is not done
    summary.update({
        "initialized_from": options.init_from,
        "initialized_weights": initialized,
        "train_sentences": len(train_dataset),
        "vocabulary_size": len(vocabulary),
        "parameters_encoder": sum(p.numel() for p in model.elmo.parameters()),
        "parameters_softmax": sum(p.numel() for p in model.softmax.parameters()),
    })
    _finish(trainer, model, tokenizer, output_dir, summary, dev_dataset is not None)
    return 0


# Text that is not what pretraining reads (words split by spaces): the share of the sampled training tokens that are
# <UNK>, and the share of the sampled CJK characters in space-free runs of UNSEGMENTED_RUN or more characters
# (jieba's words are rarely longer than 4), from which pretraining warns, and from which it refuses.
UNKNOWN_SHARE = {"warn": 0.5, "refuse": 0.9}
UNSEGMENTED_SHARE = {"warn": 0.3, "refuse": 0.7}
UNSEGMENTED_RUN = 8
TEXT_SAMPLE_LINES = 20_000


def training_text_shares(paths: list[str], vocabulary: list[str] | None) -> dict[str, float]:
    """`unknown` and `unsegmented` shares (see UNKNOWN_SHARE) of the first lines of the training files (`unknown`
    0 without a vocabulary)."""
    import regex

    known = set(vocabulary) if vocabulary is not None else None
    tokens = unknown = cjk = in_long_runs = 0
    lines = 0
    for path in paths:
        for _, words in read_corpus_lines(path):
            tokens += len(words)
            unknown += sum(word not in known for word in words) if known is not None else 0
            for word in words:
                for run in regex.findall(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+", word):
                    cjk += len(run)
                    in_long_runs += len(run) if len(run) >= UNSEGMENTED_RUN else 0
            lines += 1
            if lines >= TEXT_SAMPLE_LINES:
                break
        if lines >= TEXT_SAMPLE_LINES:
            break
    return {"unknown": unknown / tokens if tokens else 0.0, "unsegmented": in_long_runs / cjk if cjk else 0.0,
            "lines": lines}


def check_training_text(options, vocabulary: list[str] | None) -> str | None:
    """Refuse (ValueError) training text that is mostly <UNK> or looks unsegmented past the refusal shares; return a
    warning past the warning shares, else None. Both name `hf-elmo corpus segment`. Without a vocabulary (before
    one is built) only the unsegmented share is judged."""
    shares = training_text_shares(options.train_file, vocabulary)
    problems, refused = [], False
    if shares["unsegmented"] >= UNSEGMENTED_SHARE["warn"]:
        refused |= shares["unsegmented"] >= UNSEGMENTED_SHARE["refuse"]
        problems.append(f"{shares['unsegmented']:.0%} of its CJK characters stand in runs of {UNSEGMENTED_RUN} or "
                        "more without a space (unsegmented text)")
    if shares["unknown"] >= UNKNOWN_SHARE["warn"]:
        refused |= shares["unknown"] >= UNKNOWN_SHARE["refuse"]
        problems.append(f"{shares['unknown']:.0%} of its tokens are <UNK> (not in the vocabulary)")
    if not problems:
        return None
    files = " ".join(options.train_file)
    text = (f"--train-file {files}: in its first {shares['lines']:,} lines, {' and '.join(problems)}; pretraining "
            "reads words split by spaces: segment raw text first with `hf-elmo corpus segment`")
    if refused:
        raise ValueError(text + f" (refused from {UNSEGMENTED_SHARE['refuse']:.0%} unsegmented or "
                         f"{UNKNOWN_SHARE['refuse']:.0%} <UNK>)")
    return "warning: " + text


def _vocabulary(options, output_dir: Path) -> list[str]:
    """--vocab, else the run's own vocab.txt when resuming, else one built from the training files; the training
    text is checked against it (`check_training_text`)."""
    if options.vocab:
        vocabulary = load_vocabulary(options.vocab)
    elif (output_dir / "vocab.txt").exists() and not options.no_resume:
        vocabulary = load_vocabulary(output_dir / "vocab.txt")
    else:
        # Unsegmented text is named first, whatever --min-count: its lines are single "words" that rarely repeat,
        # so building a vocabulary of it fails (or succeeds with --min-count 1) with no word of the real cause.
        unsegmented = check_training_text(options, None)
        try:
            vocabulary = build_vocabulary(options.train_file, min_count=options.min_count, max_size=options.max_vocab)
        except ValueError as error:
            if unsegmented is None:
                raise
            raise ValueError(unsegmented.removeprefix("warning: ") + f" ({error})") from None
    if len(vocabulary) <= len(SPECIAL_WORDS):
        source = options.vocab or output_dir / "vocab.txt"
        raise ValueError(f"the vocabulary {source} has no words besides {', '.join(SPECIAL_WORDS)}")
    if options.lm_softmax == "sampled" and options.lm_num_sampled >= len(vocabulary):
        print(
            f"note: --num-sampled {options.lm_num_sampled} is not below the vocabulary size ({len(vocabulary)} words), "
            "so the sampled softmax costs more than the exact one; --softmax full is cheaper",
            file=sys.stderr,
        )
    warning = check_training_text(options, vocabulary)
    if warning and os.environ.get("RANK", "0") == "0":
        print(warning, file=sys.stderr)
    return vocabulary


def _training_arguments(options: PretrainingArguments, output_dir: Path, has_dev: bool):
    from transformers import TrainingArguments

    from ..utils.transformers_versions import warmup_arguments

    use_cpu = not torch.cuda.is_available()
    knobs = trainer_options({item.name for item in dataclasses.fields(TrainingArguments)})
    return TrainingArguments(
        # The warmup, a fraction of the steps, under the name this transformers version gives it.
        **{**{name: getattr(options, name) for name in knobs}, **warmup_arguments(options.warmup_ratio)},
        per_device_eval_batch_size=options.per_device_train_batch_size,
        lr_scheduler_type="linear",
        optim="adamw_torch",
        eval_strategy="steps" if has_dev else "no",
        save_strategy="steps",
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),  # pinning is for copies to a GPU
        use_cpu=use_cpu,
        ddp_backend="gloo" if use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        ddp_find_unused_parameters=False,
    )


def _say_how_the_run_starts(output_dir: Path, resume: str | None, options) -> None:
    """One line at start-up: a fresh run or a resumed one (from which checkpoint), and when the next checkpoint comes."""
    if os.environ.get("RANK", "0") != "0":
        return
    step = checkpoint_step(resume) if resume else 0
    start = f"resuming from {resume} (step {step:,})" if resume else f"starting a new run in {output_dir}"
    print(f"{start}; the next checkpoint is written at step {next_checkpoint_step(step, options.save_steps):,} (every "
          f"--save-steps {options.save_steps:,}), and Ctrl-C saves one before it stops", file=sys.stderr)


def _train(trainer, model, output_dir: Path, resume: str | None, options) -> dict:
    """Train (or, resumed at its last step, load the finished weights); the summary's training part."""
    start = time.time()
    resumed_step = checkpoint_step(resume) if resume else None
    if resumed_step is not None and options.max_steps > 0 and resumed_step >= options.max_steps:
        # Resumed at its last step, Trainer would take one more before it checks max_steps.
        model.load_state_dict(ElmoForPreTraining.from_pretrained(resume).state_dict())
        global_step = resumed_step
    else:
        global_step = trainer.train(resume_from_checkpoint=resume).global_step
    elapsed = time.time() - start
    options.trained_steps = global_step - (resumed_step or 0)  # the command's advice is for runs that trained
    if global_step == resumed_step:
        elapsed = 0.0
        if trainer.is_world_process_zero():
            print(f"{output_dir}: the run already finished at step {global_step}; nothing more to train", file=sys.stderr)
    loss_sum = trainer.run_loss_sum()
    return {
        "train_loss": loss_sum / global_step if loss_sum is not None and global_step else None,
        "global_step": global_step,
        "train_seconds_this_run": round(elapsed, 1),
        "resumed_from": resume,
    }


def _finish(trainer, model, tokenizer, output_dir: Path, summary: dict, has_dev: bool) -> None:
    """Evidence that data-parallel ranks trained one model (every rank's parameter checksum), the exact dev
    perplexity, then the final model, tokenizer and pretraining_summary.json."""
    with torch.no_grad():
        checksum = torch.tensor([float(sum(p.double().sum() for p in model.parameters()))])
    summary["world_size"] = trainer.args.world_size
    summary["rank_parameter_checksums"] = trainer.accelerator.gather(checksum).tolist()
    if has_dev:
        dev = trainer.evaluate()
        summary.update({key: value for key, value in dev.items() if key.startswith("eval_")})
    trainer.save_model(str(output_dir))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(output_dir))
        atomic_write_text(output_dir / "pretraining_summary.json", json.dumps(summary, indent=2, ensure_ascii=False))
        print(json.dumps(summary, indent=2, ensure_ascii=False))

