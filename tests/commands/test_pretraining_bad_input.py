"""Bad input to `hf-elmo pretrain` and `hf-elmo corpus`: a one-line `error:`, exit status 2, nothing
half-written, and no user file destroyed (the commands once used the fixed temporary name OUTPUT.tmp)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from folder_listing import leftovers
from hf_elmo import cli
from paths import REPO_ROOT


def corpus_main(argv):
    """`hf-elmo corpus ...` in this process."""
    return cli.main(["corpus", *argv])


def pretrain_main(argv):
    """`hf-elmo pretrain ...` in this process."""
    return cli.main(["pretrain", *argv])


REPO = REPO_ROOT
TRAIN = REPO / "tests" / "fixtures" / "bilm_tf" / "train"
DATA = str(TRAIN / "data.txt")
TINY_ARGS = [
    "--projection-dim", "16", "--cell-dim", "32", "--char-dim", "4",
    "--filters", "[[1,8],[2,8],[3,16]]", "--highway", "1", "--threads", "1", "--no-progress",
]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("hf-elmo: error: ") and "\n" not in err, err
    return err


# Files named like the old temporaries ----------------------------------------------------------


@pytest.mark.parametrize("command", ["segment", "vocab"])
def test_corpus_commands_leave_a_user_file_named_output_tmp_alone(tmp_path, command):
    flag = "--input" if command == "segment" else "--corpus"
    for name in ("ok.txt", "bad.txt"):
        (tmp_path / f"{name}.tmp").write_text("notes\n", encoding="utf-8")
    extra = ["--segmenter", "whitespace"] if command == "segment" else []
    assert corpus_main([command, flag, DATA, "--output", str(tmp_path / "ok.txt"), *extra]) == 0
    (tmp_path / "broken.txt").write_bytes(b"ok\n\xff\n")
    assert corpus_main([command, flag, str(tmp_path / "broken.txt"), "--output", str(tmp_path / "bad.txt"), *extra]) == 2
    for name in ("ok.txt", "bad.txt"):
        assert (tmp_path / f"{name}.tmp").read_text(encoding="utf-8") == "notes\n"
    assert leftovers(tmp_path) == ["bad.txt.tmp", "broken.txt", "ok.txt", "ok.txt.tmp"]


def test_pretrain_leaves_user_files_named_like_its_outputs_tmp_alone(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("vocab.txt.tmp", "pretraining_summary.json.tmp"):
        (run / name).write_text("notes\n", encoding="utf-8")
    argv = ["--train-file", DATA, "--min-count", "1", "--output-dir", str(run), "--max-steps", "1", "--batch-size", "2",
            "--save-steps", "100", *TINY_ARGS]
    assert pretrain_main(argv) == 0
    for name in ("vocab.txt.tmp", "pretraining_summary.json.tmp"):
        assert (run / name).read_text(encoding="utf-8") == "notes\n"
    assert json.loads((run / "pretraining_summary.json").read_text())["global_step"] == 1
    assert not [name for name in leftovers(run) if name.startswith(".")]  # no stray temporary


def test_pretrain_removes_what_killed_runs_left_and_says_so(tmp_path, capsys):
    from hf_elmo.cli import main as cli_main

    run = tmp_path / "run"
    (run / "checkpoint-3").mkdir(parents=True)  # a save that never finished: no trainer_state.json
    (run / "checkpoint-3" / "model.safetensors").write_bytes(b"partial")
    from hf_elmo.utils.io import temporary_name

    # a temporary of this machine whose process cannot exist (pids stay below 2**22)
    dead = temporary_name("pretraining_summary.json").replace(f".tmp-{os.getpid()}-", ".tmp-999999999-")
    (run / dead).write_text("half")
    argv = ["pretrain", "--train-file", DATA, "--min-count", "1", "--output-dir", str(run), "--max-steps", "1",
            "--batch-size", "2", "--save-steps", "100", *TINY_ARGS]
    assert cli_main(argv) == 0
    error = capsys.readouterr().err
    assert "removed 1 temporary file(s) or folder(s) of killed runs beside" in error
    assert "removed 1 incomplete checkpoint(s) of killed runs: checkpoint-3" in error
    assert not (run / dead).exists() and not (run / "checkpoint-3").exists()


# Folders and missing folders ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["vocab", "--corpus", DATA, "--output", "{adir}", "--overwrite"], "adir is a folder"),
        (["segment", "--input", DATA, "--output", "{adir}", "--overwrite"], "adir is a folder"),
        (["segment", "--input", "{adir}", "--output", "{out}"], "adir is a folder, not a corpus file"),
        (["vocab", "--corpus", DATA, "{adir}", "--output", "{out}"], "adir is a folder, not a corpus file"),
        (["segment", "--input", "{tmp}/missing.txt", "--output", "{out}"], "corpus file not found: .*missing.txt"),
        (["segment", "--input", DATA, "--output", "{tmp}/nodir/x.txt"], "output folder does not exist: .*nodir$"),
        (["vocab", "--corpus", DATA, "--output", "{tmp}/nodir/x.txt"], "output folder does not exist: .*nodir$"),
    ],
)
def test_corpus_commands_refuse_folders_and_missing_folders_clearly(tmp_path, capsys, argv, message):
    import re

    (tmp_path / "adir").mkdir()
    names = {"adir": tmp_path / "adir", "out": tmp_path / "out.txt", "tmp": tmp_path}
    argv = [arg.format(**names) for arg in argv]
    if "segment" in argv:
        argv += ["--segmenter", "whitespace"]
    assert corpus_main(argv) == 2
    assert re.search(message, one_error_line(capsys))
    assert leftovers(tmp_path) == ["adir"] and leftovers(tmp_path / "adir") == []


# Vocabulary limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (["--min-count", "100"], "no word occurs at least 100 times"),
        (["--min-count", "0"], "--min-count must be at least 1, got 0"),
        (["--max-size", "0"], "--max-size 0 leaves no words"),
        (["--max-size", "-1"], "--max-size -1 leaves no words"),
        (["--max-size", "3"], "--max-size 3 leaves no words"),
    ],
)
def test_corpus_vocab_refuses_a_vocabulary_without_words(tmp_path, capsys, options, message):
    assert corpus_main(["vocab", "--corpus", DATA, "--output", str(tmp_path / "v.txt"), *options]) == 2
    assert message in one_error_line(capsys)
    assert leftovers(tmp_path) == []


# pretrain: everything checked before the run folder is made ----------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--batch-size", "-4"], "--batch-size must be at least 1, got -4"),
        (["--lr", "-1"], "--lr must be a number >= 0, got -1.0"),
        (["--gradient-accumulation-steps", "0"], "--gradient-accumulation-steps must be at least 1, got 0"),
        (["--max-steps", "0"], "--max-steps must be at least 1, got 0"),
        (["--max-steps", "-5"], "--max-steps must be at least 1, got -5"),
        (["--epochs", "0"], "--epochs must be above 0, got 0.0"),
        (["--epochs", "-1", "--max-steps", "-5"], "--epochs must be above 0, got -1.0"),
        (["--time-budget-minutes", "-1"], "--time-budget-minutes must be above 0, got -1.0"),
        (["--time-budget-minutes", "0"], "--time-budget-minutes must be above 0, got 0.0"),
        (["--max-words", "0"], "--max-words must be at least 1, got 0"),
        (["--max-words", "-2"], "--max-words must be at least 1, got -2"),
        (["--min-count", "1000"], "no word occurs at least 1000 times"),
        (["--min-count", "0"], "--min-count must be at least 1, got 0"),
        (["--max-vocab", "0"], "--max-vocab 0 leaves no words"),
        (["--max-vocab", "3"], "--max-vocab 3 leaves no words"),
        (["--warmup-ratio", "1.5"], "--warmup-ratio must be in [0, 1), got 1.5"),
        (["--lr", "nan"], "--lr must be a number >= 0, got nan"),
        (["--filters", "[[1,4],[60,8]]"], "--filters width 60 exceeds --max-characters 50"),  # named as options
    ],
)
def test_pretrain_refuses_bad_numbers_before_writing_anything(tmp_path, capsys, options, message):
    argv = ["--train-file", DATA, "--min-count", "1", "--output-dir", str(tmp_path / "run"), "--batch-size", "2",
            *TINY_ARGS, *options]
    assert pretrain_main(argv) == 2
    assert message in one_error_line(capsys)
    assert leftovers(tmp_path) == []


def test_pretrain_help_says_what_max_steps_and_epochs_accept(capsys):
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--max-steps MAX_STEPS optimiser steps (>= 1); when given it overrides --epochs" in text
    assert "passes over the training data (> 0)" in text


def test_pretrain_refuses_an_output_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("mine\n", encoding="utf-8")
    for output_dir, message in ((tmp_path / "afile", "is a file, not a folder"),
                                (tmp_path / "afile" / "run", "lies inside")):
        argv = ["--train-file", DATA, "--min-count", "1", "--output-dir", str(output_dir), "--max-steps", "1", *TINY_ARGS]
        assert pretrain_main(argv) == 2
        assert message in one_error_line(capsys)
    assert leftovers(tmp_path) == ["afile"] and (tmp_path / "afile").read_text(encoding="utf-8") == "mine\n"


# pretrain: damaged checkpoints and --init-from folders -------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A 2-step run with a checkpoint at step 2 (and the final model in the folder itself)."""
    run = tmp_path_factory.mktemp("base") / "run"
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(run), "--max-steps", "2",
            "--save-steps", "2", "--batch-size", "2", *TINY_ARGS]
    assert pretrain_main(argv) == 0
    return run


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt", "trainer_state.json", "rng_state.pth",
                                     "scheduler.pt"])
def test_resuming_from_a_damaged_checkpoint_is_refused_naming_it(tmp_path, capsys, finished_run, damaged):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    path = run / "checkpoint-2" / damaged
    _truncate(path, path.stat().st_size // 2)
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(run), "--max-steps", "4",
            "--save-steps", "2", "--batch-size", "2", *TINY_ARGS]
    assert pretrain_main(argv) == 2
    err = one_error_line(capsys)
    assert f"the checkpoint {run / 'checkpoint-2'} is damaged" in err and damaged in err
    assert "another --output-dir" in err and f"delete {run / 'checkpoint-2'}" in err
    assert not (run / "checkpoint-4").exists()


def test_a_checkpoint_file_that_would_run_code_when_loaded_is_refused_in_one_line(tmp_path, capsys, finished_run):
    import torch

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    torch.save({"python_rng_state": RunsCode(tmp_path / "ran")}, run / "checkpoint-2" / "rng_state.pth")
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(run), "--max-steps", "4",
            "--save-steps", "2", "--batch-size", "2", *TINY_ARGS]
    assert pretrain_main(argv) == 2
    err = one_error_line(capsys)
    assert f"{run / 'checkpoint-2' / 'rng_state.pth'} cannot be loaded as plain tensors, so it is refused" in err
    assert not (tmp_path / "ran").exists() and not (run / "checkpoint-4").exists()


class RunsCode:
    """Pickled, it calls a function when loaded (creates the file `path`): what a checkpoint from someone else could
    hold."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", "model.safetensors cannot be read"),
        ("tiny", "model.safetensors cannot be read"),
        ("config-list", "config.json: it holds a JSON list, not an object"),
    ],
)
def test_init_from_a_damaged_folder_is_refused_naming_the_file(tmp_path, capsys, finished_run, damage, message):
    folder = tmp_path / "init"
    shutil.copytree(finished_run, folder)
    if damage == "truncate":
        _truncate(folder / "model.safetensors", (folder / "model.safetensors").stat().st_size // 2)
    elif damage == "tiny":
        _truncate(folder / "model.safetensors", 5)
    else:
        (folder / "config.json").write_text("[1, 2]", encoding="utf-8")
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(tmp_path / "out"),
            "--max-steps", "1", "--batch-size", "2", "--init-from", str(folder), *TINY_ARGS]
    assert pretrain_main(argv) == 2
    err = one_error_line(capsys)
    assert message in err and str(folder) in err
    assert not (tmp_path / "out").exists()


def test_init_from_another_architecture_gives_advice_that_fits_init_from(tmp_path, capsys, finished_run):
    other = [arg if arg != "32" else "48" for arg in TINY_ARGS]
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(tmp_path / "out"),
            "--max-steps", "1", "--batch-size", "2", "--init-from", str(finished_run), *other]
    assert pretrain_main(argv) == 2
    err = one_error_line(capsys)
    assert f"--cell-dim 48, but --init-from {finished_run} has lstm_cell_dim 32" in err
    assert "--no-resume" not in err and "--output-dir" not in err
    assert not (tmp_path / "out").exists()


def test_pretrain_refuses_a_vocabulary_file_of_only_the_special_words(tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\n", encoding="utf-8")
    argv = ["--train-file", DATA, "--vocab", str(vocab), "--output-dir", str(tmp_path / "run"), "--max-steps", "1", *TINY_ARGS]
    assert pretrain_main(argv) == 2
    assert "has no words besides <S>, </S>, <UNK>" in one_error_line(capsys)
    assert leftovers(tmp_path) == ["vocab.txt"]


def test_pretrain_without_vocab_names_training_files_that_hold_no_words(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    argv = ["--train-file", str(empty), "--output-dir", str(tmp_path / "run"), "--max-steps", "1", *TINY_ARGS]
    assert pretrain_main(argv) == 2
    assert f"cannot build a vocabulary: no words besides <S>, </S>, <UNK> in {empty}" in one_error_line(capsys)
    assert leftovers(tmp_path) == ["empty.txt"]


def test_a_single_process_on_a_multi_core_cpu_is_shown_the_torchrun_command():
    from hf_elmo.cli.pretrain import data_parallel_advice

    argv = ["--train-file", "my corpus.txt", "--output-dir", "run", "--threads", "2"]
    advice = data_parallel_advice({}, 2, argv)
    assert "torchrun --standalone --nproc_per_node 2 -m hf_elmo.cli pretrain --train-file 'my corpus.txt' " \
           "--output-dir run --threads 1" in advice
    assert data_parallel_advice({"WORLD_SIZE": "2"}, 2, argv) is None  # already data-parallel
    assert data_parallel_advice({}, 1, argv) is None


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_ctrl_c_ends_with_one_line_saying_what_remains(command, tmp_path):
    """SIGINT while training: exit status 130 and one line, no traceback (45-76 lines before)."""
    import signal
    import subprocess
    import sys
    import time

    from finetune_helpers import save_tiny_base, toy_sentences, write_conll

    run = tmp_path / "run"
    if command == "pretrain":
        argv = ["pretrain", "--train-file", DATA, "--min-count", "1", "--output-dir", str(run), "--batch-size", "2",
                "--max-steps", "100000", "--save-steps", "3", *TINY_ARGS]
        ready = lambda: any((path / "trainer_state.json").is_file() for path in run.glob("checkpoint-*"))  # noqa: E731
        expected = "the same command resumes the run from"
    else:
        base = save_tiny_base(tmp_path / "base")
        data = write_conll(tmp_path / "train.txt", toy_sentences(64, 1))
        argv = ["finetune", "train", "--model", base, "--train", str(data), "--output-dir", str(run),
                "--epochs", "10000", "--no-precompute-elmo", "--batch-size", "2", "--threads", "1"]
        log = tmp_path / "stderr.txt"
        ready = lambda: "trainable of" in log.read_text()  # noqa: E731
        expected = f"nothing was written to {run}; the same command resumes from {run.parent / '.run.checkpoints'}"
    stderr = open(tmp_path / "stderr.txt", "w")
    # A suite started in the background by a shell without job control inherits SIGINT ignored, and Python
    # keeps an ignored SIGINT ignored: give the command the default disposition a user's terminal gives it.
    process = subprocess.Popen([sys.executable, "-m", "hf_elmo.cli", *argv], cwd=REPO, stderr=stderr,
                               stdout=subprocess.DEVNULL,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 240
        while not ready() and process.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        stderr.close()
    text = (tmp_path / "stderr.txt").read_text()
    assert code == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    # Issue 45.2: the signal ends the step, which is saved as a checkpoint, named.
    last = text.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: interrupted; saved the checkpoint ") and expected in last, text[-1000:]


def test_a_run_folder_is_never_resumed_by_another_run(tmp_path, capsys, finished_run):
    """--no-resume into a folder holding a run is refused (a later plain rerun would have resumed the old run's
    checkpoints), and a resume with other options than the run was started with is refused too."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = leftovers(run)
    argv = ["--train-file", DATA, "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(run), "--max-steps", "4",
            "--save-steps", "2", "--batch-size", "2", *TINY_ARGS]
    assert pretrain_main([*argv, "--no-resume"]) == 2
    assert "--no-resume: " in one_error_line(capsys) and leftovers(run) == before
    assert pretrain_main([*argv, "--seed", "7"]) == 2
    err = one_error_line(capsys)
    assert "holds a run started with other options (--seed 42 there, 7 now)" in err, err
    assert leftovers(run) == before


# pretrain: text that is not words split by spaces ---------------------------------------------------------------

UNSEGMENTED = "今天下午我们在北京大学的图书馆里读了很多关于自然语言处理的书\n" * 30


def test_unsegmented_chinese_is_refused_naming_corpus_segment(tmp_path, capsys):
    corpus = tmp_path / "raw.txt"
    corpus.write_text(UNSEGMENTED, encoding="utf-8")
    assert pretrain_main(["--train-file", str(corpus), "--output-dir", str(tmp_path / "out"), "--max-steps", "1",
                          "--min-count", "1", *TINY_ARGS]) == 2
    err = one_error_line(capsys)
    assert "100% of its CJK characters stand in runs of 8 or more without a space (unsegmented text)" in err
    assert "`hf-elmo corpus segment`" in err and not (tmp_path / "out").exists()


# Issue 45.3: the unsegmented-text message comes first, whatever --min-count ------------------------------------------

RAW_CHINESE = ["今天下午我们在北京大学的图书馆里读了很多关于自然语言处理的书", "明天上午他们要去上海参加一个关于人工智能的会议",
               "这家餐厅的小米粥和红枣糕都非常好吃价格也很便宜", "我的朋友昨天买了一部新手机拍照效果比以前好多了"]


@pytest.mark.parametrize("min_count", [None, "1", "3", "100"])
def test_unsegmented_text_is_named_first_whatever_the_min_count(tmp_path, capsys, min_count):
    corpus = tmp_path / "raw.txt"
    corpus.write_text("".join(f"{line}{n}\n" for n in range(10) for line in RAW_CHINESE), encoding="utf-8")
    argv = ["pretrain", "--train-file", str(corpus), "--output-dir", str(tmp_path / "out"), "--max-steps", "1",
            *(["--min-count", min_count] if min_count else []), *TINY_ARGS]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hf-elmo: error: --train-file") and "\n" not in err, err
    assert "of its CJK characters stand in runs of 8 or more without a space (unsegmented text)" in err
    assert "`hf-elmo corpus segment`" in err and not (tmp_path / "out").exists()


def test_text_partly_unsegmented_names_it_beside_the_vocabulary_problem(tmp_path, capsys):
    """Between the warning and the refusal shares: the vocabulary fails with the text's problem named too."""
    corpus = tmp_path / "half.txt"
    words = "我们 在 北京 读 书"
    corpus.write_text("".join(f"{words} {RAW_CHINESE[n % 4][:12]}{n}\n" for n in range(20)), encoding="utf-8")
    assert cli.main(["pretrain", "--train-file", str(corpus), "--output-dir", str(tmp_path / "out"),
                          "--min-count", "100", *TINY_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert "(unsegmented text)" in err and "no word occurs at least 100 times" in err and "\n" not in err, err


def test_training_text_mostly_unknown_words_is_refused_and_a_large_share_warned_of(tmp_path, capsys):
    lines = (TRAIN / "data.txt").read_text(encoding="utf-8").splitlines()
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("".join(" ".join(f"qq{n}x{i}" for i in range(12)) + "\n" for n in range(20)), encoding="utf-8")
    argv = ["--vocab", str(TRAIN / "vocab.txt"), "--max-steps", "1", "--batch-size", "2", *TINY_ARGS]
    assert pretrain_main(["--train-file", str(unknown), "--output-dir", str(tmp_path / "a"), *argv]) == 2
    err = one_error_line(capsys)
    assert "100% of its tokens are <UNK> (not in the vocabulary)" in err and "`hf-elmo corpus segment`" in err
    assert not (tmp_path / "a").exists()
    # Each line with twice as many unknown words as known ones: warned of, trained.
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("".join(line + " " + " ".join(f"qq{i}" for i in range(2 * len(line.split()))) + "\n"
                             for line in lines), encoding="utf-8")
    assert pretrain_main(["--train-file", str(mixed), "--output-dir", str(tmp_path / "b"), *argv]) == 0
    err = capsys.readouterr().err
    found = re.search(r"warning: --train-file \S+mixed.txt: in its first \d+ lines, (\d+)% of its tokens are <UNK>",
                      err)
    assert found and 50 <= int(found.group(1)) < 90 and "`hf-elmo corpus segment`" in err, err
    assert (tmp_path / "b" / "pretraining_summary.json").is_file()
