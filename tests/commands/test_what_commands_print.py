"""What the commands print around their work (issue 46.11, issue 45.9).

- Exporting or embedding with a tagger's folder printed transformers' load report, a table ending "not ok if you expect
  identical arch": one line now says the biLM of a task model is used.
- A Ctrl-C during interpreter exit printed a traceback from torch's exit hook although the output was complete.
- transformers' "Loading weights" / "Writing model shards" bars: one per weight file read or written (28 in a short
  pretraining run), between the command's own lines.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from hf_elmo.models.elmo.modeling_elmo import ElmoForTokenClassification
from hf_elmo.models.elmo.tokenization_elmo import ElmoTokenizer
from paths import REPO_ROOT
from small_models import tiny_config


def hf_elmo(*argv, code=None):
    command = [sys.executable, "-c", code, *map(str, argv)] if code else [sys.executable, "-m", "hf_elmo.cli",
                                                                         *map(str, argv)]
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, env=environment, timeout=600)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagger")
    torch.manual_seed(0)
    ElmoForTokenClassification(tiny_config(num_labels=3)).save_pretrained(folder)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(folder)
    return folder


@pytest.mark.parametrize("command", ["embed", "convert --to allennlp"])
def test_a_taggers_folder_used_for_its_biLM_is_said_in_one_line(tmp_path, tagger, command):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    argv = (["embed", text, tmp_path / "out.hdf5", "--model", tagger] if command == "embed" else
            ["convert", "--to", "allennlp", "--model", tagger, "--output", tmp_path / "bilm"])
    result = hf_elmo(*argv)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (f"{tagger} holds ElmoForTokenClassification: using its biLM as ElmoModel; its classifier, "
                        "scalar_mix weights are left out"), result.stderr
    assert "LOAD REPORT" not in result.stderr and "identical arch" not in result.stderr
    assert "Loading weights" not in result.stderr and len(lines) == 2, result.stderr


# A Ctrl-C that arrives while Python runs its exit hooks (torch registers some): the hook registered first runs last.
INTERRUPTED_AT_EXIT = """
import atexit, os, signal, sys, time

def interrupted():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    print("exit hook done", file=sys.stderr)

atexit.register(interrupted)
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]
from hf_elmo.cli import main
sys.exit(main())
"""


def test_a_ctrl_c_while_the_interpreter_exits_prints_no_traceback(tmp_path, tagger):
    result = hf_elmo("info", "--model", tagger, code=INTERRUPTED_AT_EXIT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr[-2000:]
    assert "exit hook done" in result.stderr


def test_the_python_entry_point_leaves_ctrl_c_alone(tagger):
    """Called with arguments (from Python, as the tests do), the command does not change the process's signals."""
    import signal

    from hf_elmo import cli

    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["info", "--model", str(tagger)]) == 0
    assert signal.getsignal(signal.SIGINT) is before


# Issue 45.9: `--output` wherever a command names an output; one progress bar per phase; no tip after no training ---


def test_output_is_an_option_of_every_command_that_writes(tmp_path, tagger):
    from hf_elmo.cli import build_parser

    parser = build_parser()
    for argv, attribute in (
        (["embed", "in.txt", "--output", "out.hdf5"], "output_option"),
        (["convert", "--to", "allennlp", "--model", "m", "--output", "out"], "output_option"),
        (["export", "--output", "out"], "output"),
        (["corpus", "segment", "--input", "in.txt", "--output", "out"], "output"),
        (["corpus", "shopping", "--input", "in.csv", "--output", "out"], "output_dir"),
        (["pretrain", "--train-file", "in.txt", "--output", "out"], "output_dir"),
        (["finetune", "train", "--train", "in.txt", "--output", "out"], "output_dir"),
        (["finetune", "train-classifier", "--train", "in.txt", "--output", "out"], "output_dir"),
    ):
        assert getattr(parser.parse_args(argv), attribute) == argv[-1], argv
    from hf_elmo import cli

    output = tmp_path / "bilm"
    assert cli.main(["convert", "--to", "allennlp", "--model", str(tagger), "--output", str(output)]) == 0
    assert (output / "options.json").is_file() and (output / "weights.hdf5").is_file()


@pytest.mark.parametrize("argv, expected", [
    (["convert", "--to", "allennlp", "--model", "{tmp}", "{tmp}/a", "--output", "{tmp}/b"], "two outputs given"),
    (["convert", "--to", "allennlp", "--model", "{tmp}"], "the output is missing: give --output OUTPUT_DIR"),
    (["embed", "{tmp}/in.txt"], "the output is missing: give --output OUTPUT"),
])
def test_an_output_given_twice_or_not_at_all_is_one_line(tmp_path, argv, expected, capsys):
    from hf_elmo import cli

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    assert cli.main([arg.replace("{tmp}", str(tmp_path)) for arg in argv]) == 2
    assert capsys.readouterr().err.strip() .startswith(f"hf-elmo: error: {expected}")


PRETRAIN = ["pretrain", "--train-file", str(REPO_ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt"),
            "--min-count", "1", "--max-steps", "4", "--save-steps", "1", "--batch-size", "2", "--projection-dim", "16",
            "--cell-dim", "32", "--char-dim", "4", "--filters", "[[1,8],[2,8],[3,16]]", "--highway", "1",
            "--threads", "1"]


def test_pretraining_draws_no_bar_per_checkpoint_and_no_tip_when_nothing_was_trained(tmp_path, monkeypatch, capsys):
    from hf_elmo import cli
    from hf_elmo.cli import pretrain

    from transformers.utils import logging as hf_logging

    monkeypatch.setattr(pretrain.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(pretrain, "_cuda_available", lambda: False)
    argv = [*PRETRAIN, "--output-dir", str(tmp_path / "run")]
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as in a fresh process (other commands run in this one may have turned them off)
    try:
        assert cli.main(argv) == 0
    finally:
        if not bars_were_on:
            hf_logging.disable_progress_bar()
    err = capsys.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err, err[-3000:]
    assert "torchrun" in err  # a run that trained: the tip for the next one
    assert cli.main(argv) == 0  # finished already: nothing to train, so no advice about training faster
    err = capsys.readouterr().err
    assert "nothing more to train" in err and "torchrun" not in err, err[-3000:]


def test_the_interrupt_messages_start_a_line_after_the_progress_bar(tmp_path, monkeypatch, capsys):
    """On a terminal the training bar holds the cursor mid-line (tqdm redraws it with \\r): the messages that follow a
    Ctrl-C start a line of their own."""
    import signal

    from transformers.utils import logging as hf_logging

    from hf_elmo import cli
    from hf_elmo.pretraining.trainer import LanguageModelTrainer
    from test_interruption import signalled_at_step

    argv = list(PRETRAIN)
    argv[argv.index("--max-steps") + 1] = "50"
    argv[argv.index("--save-steps") + 1] = "1000"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # capsys's stream, standing for a terminal
    signalled_at_step(monkeypatch, LanguageModelTrainer, 3, signal.SIGINT)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        assert cli.main([*argv, "--output-dir", str(tmp_path / "run")]) == 130
    finally:
        if not bars_were_on:
            hf_logging.disable_progress_bar()
    text = capsys.readouterr().err
    assert "it/s]" in text  # the bar was drawn
    for message in ("hf-elmo: SIGINT received", "hf-elmo: interrupted; saved the checkpoint"):
        start = text.index(message)
        assert text[start - 1] == "\n", repr(text[max(0, start - 200):start + 100])
