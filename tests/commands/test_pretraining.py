"""Pretraining: the biLM objective, the sampled softmax, corpus / vocabulary handling, resume, DDP."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm, write_bilm_files
from hf_elmo.pretraining.data import LanguageModelCollator, LineDataset, load_vocabulary
from hf_elmo.pretraining.language_model import ElmoForPreTraining, ElmoLanguageModelSoftmax
from hf_elmo.pretraining.run import exact_perplexity
from paths import REPO_ROOT
from hf_elmo.cli import main as _hf_elmo


def pretrain_main(argv):
    """`hf-elmo pretrain ...` in this process."""
    return _hf_elmo(["pretrain", *argv])


REPO = REPO_ROOT
TRAIN = REPO / "tests" / "fixtures" / "bilm_tf" / "train"
TINY_ARGS = [
    "--projection-dim", "16", "--cell-dim", "32", "--char-dim", "4",
    "--filters", "[[1,8],[2,8],[3,16]]", "--highway", "1", "--threads", "1", "--no-progress",
]


def tiny_config(vocabulary, **overrides) -> ElmoConfig:
    settings = dict(
        char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]], num_highway_layers=1, projection_dim=8,
        lstm_cell_dim=16, num_lstm_layers=2, lm_vocab=vocabulary, lm_dropout=0.0,
    )
    settings.update(overrides)
    return ElmoConfig(**settings)


def corpus_batch(vocabulary):
    sentences = [line.split() for line in (TRAIN / "data.txt").read_text().splitlines()][:3]
    return LanguageModelCollator(ElmoTokenizer(), vocabulary)(sentences)


# The objective ---------------------------------------------------------------------------------


def test_forward_lm_never_sees_the_future_and_backward_lm_never_sees_the_past():
    vocabulary = load_vocabulary(TRAIN / "vocab.txt")
    torch.manual_seed(0)
    model = ElmoForPreTraining(tiny_config(vocabulary)).eval()
    tokenizer = ElmoTokenizer()
    words = "the curse of dimensionality in language modeling".split()
    changed = list(words)
    k = 4
    changed[k] = "xylophone"
    with torch.no_grad():
        a = model(**tokenizer(words, is_split_into_words=True, return_tensors="pt"))
        b = model(**tokenizer(changed, is_split_into_words=True, return_tensors="pt"))
    position = k + 1  # <S> is position 0
    # Forward states before the changed word and backward states after it are untouched ...
    torch.testing.assert_close(a.forward_hidden_states[:, :position], b.forward_hidden_states[:, :position], rtol=0, atol=0)
    torch.testing.assert_close(a.backward_hidden_states[:, position + 1 :], b.backward_hidden_states[:, position + 1 :], rtol=0, atol=0)
    # ... while the changed word itself does move both directions' states at its position.
    assert not torch.allclose(a.forward_hidden_states[:, position], b.forward_hidden_states[:, position])
    assert not torch.allclose(a.backward_hidden_states[:, position], b.backward_hidden_states[:, position])


def test_loss_is_the_mean_of_both_directions_cross_entropies():
    vocabulary = load_vocabulary(TRAIN / "vocab.txt")
    torch.manual_seed(1)
    model = ElmoForPreTraining(tiny_config(vocabulary)).eval()
    batch = corpus_batch(vocabulary)
    with torch.no_grad():
        output = model(**batch)
    word_to_id = {word: i for i, word in enumerate(vocabulary)}
    forward_terms, backward_terms = [], []
    for row in range(batch["labels"].shape[0]):
        n = int(batch["attention_mask"][row].sum())
        targets = [0] + batch["labels"][row, :n].tolist() + [1]  # <S> w1..wn </S>
        for t in range(n + 1):  # forward: position t predicts t + 1
            logits = torch.nn.functional.linear(output.forward_hidden_states[row, t], model.softmax.weight, model.softmax.bias)
            forward_terms.append(-torch.log_softmax(logits, -1)[targets[t + 1]])
        for t in range(1, n + 2):  # backward: position t predicts t - 1
            logits = torch.nn.functional.linear(output.backward_hidden_states[row, t], model.softmax.weight, model.softmax.bias)
            backward_terms.append(-torch.log_softmax(logits, -1)[targets[t - 1]])
    assert word_to_id["<S>"] == 0 and word_to_id["</S>"] == 1
    expected_forward = torch.stack(forward_terms).mean()
    expected_backward = torch.stack(backward_terms).mean()
    torch.testing.assert_close(output.forward_loss, expected_forward)
    torch.testing.assert_close(output.backward_loss, expected_backward)
    torch.testing.assert_close(output.loss, (expected_forward + expected_backward) / 2)
    assert int(output.num_predictions) == len(forward_terms)


def test_sampled_softmax_agrees_with_full_softmax_in_expectation():
    torch.manual_seed(0)
    vocabulary = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(47)]
    config = tiny_config(vocabulary, lm_softmax="sampled", lm_num_sampled=50)
    head = ElmoLanguageModelSoftmax(config)
    torch.nn.init.normal_(head.weight, std=0.5)
    torch.nn.init.normal_(head.bias, std=0.5)
    hidden = torch.randn(64, config.projection_dim)
    targets = torch.randint(0, len(vocabulary), (64,))
    full = head.full_loss(hidden, targets).item() / 64
    generator = torch.Generator().manual_seed(0)
    gaps = []
    for num_sampled in (10, 200):
        head.num_sampled = num_sampled
        draws = [head.sampled_loss(hidden, targets, generator=generator).item() / 64 for _ in range(300)]
        gaps.append(abs(sum(draws) / len(draws) - full))
    # Consistent estimator: close for many samples, and closer with more samples.
    assert gaps[1] < 0.02 * full
    assert gaps[1] < gaps[0]


def test_training_with_sampled_softmax_lowers_dev_perplexity(tmp_path):
    vocabulary = load_vocabulary(TRAIN / "vocab.txt")
    torch.manual_seed(0)
    untrained = ElmoForPreTraining(tiny_config(vocabulary))
    collator = LanguageModelCollator(ElmoTokenizer(), vocabulary)
    loader = torch.utils.data.DataLoader(LineDataset(TRAIN / "data.txt"), batch_size=2, collate_fn=collator)
    before = exact_perplexity(untrained, loader)["perplexity"]
    code = pretrain_main(
        ["--train-file", str(TRAIN / "data.txt"), "--dev-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"),
         "--output-dir", str(tmp_path / "run"), "--softmax", "sampled", "--num-sampled", "16", "--epochs", "40",
         "--batch-size", "2", "--lr", "1e-2", "--eval-steps", "1000", "--save-steps", "1000", *TINY_ARGS]
    )
    assert code == 0
    after = json.loads((tmp_path / "run" / "pretraining_summary.json").read_text())["eval_perplexity"]
    assert after < 0.6 * before


def test_tiny_model_reaches_bilm_tf_perplexity_bar(tmp_path):
    """bilm-tf's own training test: test perplexity below 20 on its toy corpus."""
    code = pretrain_main(
        ["--train-file", str(TRAIN / "data.txt"), "--dev-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"),
         "--output-dir", str(tmp_path / "run"), "--epochs", "50", "--batch-size", "2", "--lr", "1e-2",
         "--eval-steps", "1000", "--save-steps", "1000", *TINY_ARGS]
    )
    assert code == 0
    summary = json.loads((tmp_path / "run" / "pretraining_summary.json").read_text())
    assert summary["eval_perplexity"] < 20
    # The encoder loads from the pretraining folder without the softmax, with the same numbers.
    encoder = ElmoModel.from_pretrained(tmp_path / "run").eval()
    full = ElmoForPreTraining.from_pretrained(tmp_path / "run").eval()
    assert not any(name.startswith("softmax") for name in encoder.state_dict())
    batch = ElmoTokenizer.from_pretrained(tmp_path / "run")(["the curse of dimensionality"], return_tensors="pt")
    with torch.no_grad():
        top = encoder(**batch, keep_sentence_boundaries=True).last_hidden_state
        pre = full(**batch)
    torch.testing.assert_close(top[..., :16], pre.forward_hidden_states, rtol=0, atol=0)
    assert full.config.lm_vocab == load_vocabulary(TRAIN / "vocab.txt")

    # AllenNLP-layout equivalence: export to options.json + weights.hdf5, load with the converter that
    # reproduces the AllenNLP / bilm-tf fixtures, and get the same vectors.
    write_bilm_files(encoder, tmp_path / "bilm")
    reloaded = load_model_from_bilm(tmp_path / "bilm" / "options.json", tmp_path / "bilm" / "weights.hdf5")
    with torch.no_grad():
        for a, b in zip(encoder(**batch).hidden_states, reloaded(**batch).hidden_states):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


# Vocabulary and corpus ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [(b"", "the corpus is empty"), (b"   \n \t \n", "the corpus is empty"), (b"good line\nbad \xff\xfe line\n", r"c\.txt:2: not valid UTF-8")],
)
def test_bad_corpus_files_fail_with_file_and_line(tmp_path, capsys, content, message):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(content)
    code = pretrain_main(["--train-file", str(corpus), "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(tmp_path / "o"), *TINY_ARGS])
    assert code == 2
    assert re.search(message, capsys.readouterr().err)


def test_resuming_from_a_checkpoint_of_another_architecture_is_refused(tmp_path, capsys):
    common = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--output-dir", str(tmp_path / "o"),
              "--max-steps", "2", "--save-steps", "2", "--batch-size", "2"]
    assert pretrain_main(common + TINY_ARGS) == 0
    other = [arg if arg != "32" else "48" for arg in TINY_ARGS]  # another cell size
    assert pretrain_main(common + ["--max-steps", "4"] + other) == 2
    assert "holds a run started with other options (--cell-dim 32 there, 48 now)" in capsys.readouterr().err
    (tmp_path / "o" / "run_options.json").unlink()  # a run from before the options were recorded
    assert pretrain_main(common + ["--max-steps", "4"] + other) == 2
    assert "another architecture (differs in lstm_cell_dim)" in capsys.readouterr().err


def test_running_a_finished_run_again_trains_nothing_more(tmp_path, capsys):
    for steps in (["--max-steps", "3"], ["--epochs", "1"]):  # 3 steps: not a whole number of epochs at batch 4
        output = tmp_path / steps[0].strip("-")
        command = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--output-dir",
                   str(output), "--batch-size", "4", "--save-steps", "2", *steps, *TINY_ARGS]
        assert pretrain_main(command) == 0
        first = json.loads((output / "pretraining_summary.json").read_text())
        weights = ElmoForPreTraining.from_pretrained(output).state_dict()
        checkpoints = sorted(p.name for p in output.glob("checkpoint-*"))
        assert pretrain_main(command) == 0
        again = json.loads((output / "pretraining_summary.json").read_text())
        assert again["global_step"] == first["global_step"], steps
        assert again["train_loss"] == first["train_loss"] and again["train_seconds_this_run"] == 0, steps
        assert sorted(p.name for p in output.glob("checkpoint-*")) == checkpoints, steps
        for name, value in ElmoForPreTraining.from_pretrained(output).state_dict().items():
            torch.testing.assert_close(value, weights[name], rtol=0, atol=0, msg=name)
        assert "already finished" in capsys.readouterr().err


def test_init_from_continues_from_a_finished_run_and_refuses_another_architecture(tmp_path, capsys):
    common = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--batch-size", "2"]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "a"), "--max-steps", "3", *TINY_ARGS]) == 0
    # With a zero learning rate the continued run must end exactly where the first one ended.
    frozen = ["--max-steps", "1", "--lr", "0", "--init-from", str(tmp_path / "a")]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "b"), *frozen, *TINY_ARGS]) == 0
    first = ElmoForPreTraining.from_pretrained(tmp_path / "a").state_dict()
    continued = ElmoForPreTraining.from_pretrained(tmp_path / "b").state_dict()
    for name, value in first.items():
        torch.testing.assert_close(continued[name], value, rtol=0, atol=0, msg=name)
    summary = json.loads((tmp_path / "b" / "pretraining_summary.json").read_text())
    assert summary["initialized_from"] == str(tmp_path / "a")
    other = [arg if arg != "32" else "48" for arg in TINY_ARGS]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "c"), *frozen, *other]) == 2
    assert (f"--cell-dim 48, but --init-from {tmp_path / 'a'} has lstm_cell_dim 32: leave the architecture options "
            "out to take the model's, or give its values") in capsys.readouterr().err
    no_skip = ["--no-skip-connections"]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "c"), *frozen, *TINY_ARGS, *no_skip]) == 2
    assert "--no-skip-connections given, but --init-from" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_init_from_an_encoder_only_folder_loads_the_encoder_and_starts_a_fresh_softmax(tmp_path, capsys):
    common = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--batch-size", "2"]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "a"), "--max-steps", "3", *TINY_ARGS]) == 0
    ElmoModel.from_pretrained(tmp_path / "a").save_pretrained(tmp_path / "encoder")  # as the shipped default is
    frozen = ["--max-steps", "1", "--lr", "0", "--seed", "5", "--init-from", str(tmp_path / "encoder")]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "b"), *frozen, *TINY_ARGS]) == 0
    assert "initialised the encoder (softmax starts fresh)" in capsys.readouterr().err
    first = ElmoForPreTraining.from_pretrained(tmp_path / "a").state_dict()
    continued = ElmoForPreTraining.from_pretrained(tmp_path / "b").state_dict()
    encoder_names = [name for name in first if name.startswith("elmo.") and ".scalar_mixes." not in name]
    assert any("bilstm" in name for name in encoder_names)
    for name in encoder_names:
        torch.testing.assert_close(continued[name], first[name], rtol=0, atol=0, msg=name)
    assert not torch.equal(continued["softmax.weight"], first["softmax.weight"])
    summary = json.loads((tmp_path / "b" / "pretraining_summary.json").read_text())
    assert summary["initialized_weights"] == "encoder (softmax starts fresh)"


def test_init_from_the_shipped_default_on_a_new_corpus_keeps_its_character_vocabulary(tmp_path, capsys):
    import hf_elmo

    # No architecture option: they are read from the model's config.json. The fixture corpus has other characters
    # than the shipped model's training text.
    shipped = ["--char-min-count", "2", "--threads", "1", "--no-progress"]
    argv = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--batch-size", "2",
            "--output-dir", str(tmp_path / "adapted"), "--max-steps", "1", "--lr", "0", "--init-from", "default", *shipped]
    assert pretrain_main(argv) == 0
    assert "initialised the encoder (softmax starts fresh)" in capsys.readouterr().err
    default = Path(hf_elmo.DEFAULT_MODEL)
    assert json.loads((tmp_path / "adapted" / "char_vocab.json").read_text(encoding="utf-8")) == json.loads(
        (default / "char_vocab.json").read_text(encoding="utf-8"))
    adapted = ElmoModel.from_pretrained(tmp_path / "adapted").state_dict()
    for name, value in ElmoModel.from_pretrained(default).state_dict().items():
        if not name.startswith("scalar_mixes."):
            torch.testing.assert_close(adapted[name], value, rtol=0, atol=0, msg=name)


def test_no_progress_silences_every_bar_and_an_oversized_sample_is_pointed_out(tmp_path, capsys):
    from transformers.utils import logging as transformers_logging

    common = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--batch-size", "2"]
    assert pretrain_main(common + ["--output-dir", str(tmp_path / "a"), "--max-steps", "1", *TINY_ARGS]) == 0
    capsys.readouterr()
    vocabulary_size = len(load_vocabulary(TRAIN / "vocab.txt"))
    sampled = ["--softmax", "sampled", "--num-sampled", str(vocabulary_size + 5), "--max-steps", "1"]
    bars_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.enable_progress_bar()
    try:
        code = pretrain_main(
            common + ["--output-dir", str(tmp_path / "b"), "--init-from", str(tmp_path / "a"), *sampled, *TINY_ARGS]
        )
        assert transformers_logging.is_progress_bar_enabled()  # the command leaves the caller's setting as it was
    finally:
        if not bars_were_on:
            transformers_logging.disable_progress_bar()
    assert code == 0
    err = capsys.readouterr().err
    assert f"--num-sampled {vocabulary_size + 5} is not below the vocabulary size ({vocabulary_size} words)" in err
    assert "Loading weights" not in err and "it/s]" not in err


def test_init_from_a_folder_without_weights_or_config_is_refused(tmp_path, capsys):
    common = ["--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"), "--batch-size", "2",
              "--output-dir", str(tmp_path / "o"), "--max-steps", "1"]
    (tmp_path / "empty").mkdir()
    assert pretrain_main(common + ["--init-from", str(tmp_path / "empty"), *TINY_ARGS]) == 2
    assert "has no config.json: it is not a saved hf-elmo model folder" in capsys.readouterr().err  # before torch
    tiny_config(None, char_cnn_filters=[[1, 8], [2, 8], [3, 16]], projection_dim=16, lstm_cell_dim=32).save_pretrained(
        tmp_path / "config-only"
    )
    assert pretrain_main(common + ["--init-from", str(tmp_path / "config-only"), *TINY_ARGS]) == 2
    assert "has no model.safetensors" in capsys.readouterr().err
    assert pretrain_main(common + ["--init-from", str(tmp_path / "nope"), *TINY_ARGS]) == 2
    assert "model folder not found" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# Interruption and scale-out (subprocesses) -----------------------------------------------------


def _command(output_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "hf_elmo.cli", "pretrain", "--train-file", str(TRAIN / "data.txt"), "--vocab", str(TRAIN / "vocab.txt"),
        "--output-dir", str(output_dir), "--batch-size", "2", "--lr", "5e-3", "--seed", "7", *TINY_ARGS, *extra,
    ]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def test_killed_run_resumes_and_ends_where_an_uninterrupted_run_ends(tmp_path):
    steps = ["--max-steps", "60", "--save-steps", "10", "--save-total-limit", "10"]
    subprocess.run(_command(tmp_path / "straight", *steps), env=_env(), check=True, capture_output=True, timeout=300)

    process = subprocess.Popen(_command(tmp_path / "killed", *steps), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not (tmp_path / "killed" / "checkpoint-20" / "trainer_state.json").exists():
        assert process.poll() is None, "training ended before it could be interrupted"
        assert time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "killed" / "pretraining_summary.json").exists()

    subprocess.run(_command(tmp_path / "killed", *steps), env=_env(), check=True, capture_output=True, timeout=300)
    summary = json.loads((tmp_path / "killed" / "pretraining_summary.json").read_text())
    assert summary["resumed_from"] is not None and summary["global_step"] == 60
    straight = ElmoForPreTraining.from_pretrained(tmp_path / "straight").state_dict()
    resumed = ElmoForPreTraining.from_pretrained(tmp_path / "killed").state_dict()
    for name, value in straight.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=1e-6, msg=name)
    # train_loss is the mean over all 60 steps, not over the steps after the resume (the same float32 losses
    # summed in float64 in the same order: equal to within the 1e-6 the weights are held to).
    straight_loss = json.loads((tmp_path / "straight" / "pretraining_summary.json").read_text())["train_loss"]
    assert math.isclose(summary["train_loss"], straight_loss, rel_tol=1e-6)

    # Killed after the last checkpoint but before the summary: a rerun trains nothing and keeps the loss.
    (tmp_path / "killed" / "pretraining_summary.json").unlink()
    subprocess.run(_command(tmp_path / "killed", *steps), env=_env(), check=True, capture_output=True, timeout=300)
    rerun = json.loads((tmp_path / "killed" / "pretraining_summary.json").read_text())
    assert rerun["train_loss"] == summary["train_loss"]


def test_two_cpu_processes_train_one_model_and_count_each_dev_sentence_once(tmp_path):
    # 5 dev sentences at batch 2 on 2 processes: evening out the last batches would repeat one sentence.
    dev = tmp_path / "dev.txt"
    dev.write_text("".join(TRAIN.joinpath("data.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:5]),
                   encoding="utf-8")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command = launcher + _command(tmp_path / "ddp", "--max-steps", "6", "--save-steps", "3", "--dev-file", str(dev))[1:]
    result = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "ddp" / "pretraining_summary.json").read_text())
    assert summary["world_size"] == 2
    first, second = summary["rank_parameter_checksums"]
    assert math.isclose(first, second, rel_tol=0, abs_tol=0)
    model = ElmoModel.from_pretrained(tmp_path / "ddp" / "checkpoint-6")
    assert model.config.lstm_cell_dim == 32

    final = ElmoForPreTraining.from_pretrained(tmp_path / "ddp")
    collator = LanguageModelCollator(ElmoTokenizer.from_pretrained(tmp_path / "ddp"), final.config.lm_vocab)
    one_process = exact_perplexity(final, torch.utils.data.DataLoader(LineDataset(dev), batch_size=5, collate_fn=collator))
    assert summary["eval_tokens"] == one_process["tokens"]
    # Other batches, so other float32 roundings of each batch's mean loss (a few eps); the sums are float64.
    assert math.isclose(summary["eval_perplexity"], one_process["perplexity"], rel_tol=1e-5)


def test_corpus_command_segments_chinese_and_builds_the_vocabulary(tmp_path, capsys):
    from hf_elmo.cli import main as cli_main

    raw = tmp_path / "raw.txt"
    raw.write_text("我喜欢吃小米。\n\n   \n小米手机挺好用\n", encoding="utf-8")
    assert cli_main(["corpus", "segment", "--input", str(raw), "--output", str(tmp_path / "c.txt")]) == 0
    lines = (tmp_path / "c.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and "小米" in lines[0].split() and "小米" in lines[1].split()
    assert cli_main(["corpus", "vocab", "--corpus", str(tmp_path / "c.txt"), "--output", str(tmp_path / "v.txt")]) == 0
    assert load_vocabulary(tmp_path / "v.txt")[3] == "小米"
    assert cli_main(["corpus", "vocab", "--corpus", str(tmp_path / "c.txt"), "--output", str(tmp_path / "v.txt")]) == 2
    assert "already exists" in capsys.readouterr().err
    raw.write_bytes(b"ok\n\xff\n")
    assert cli_main(["corpus", "segment", "--input", str(raw), "--output", str(tmp_path / "d.txt")]) == 2
    assert "raw.txt:2: not valid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "d.txt").exists() and not (tmp_path / "d.txt.tmp").exists()


def test_a_checkpoints_loss_sum_is_read_only_for_its_own_step(tmp_path):
    from hf_elmo.utils.checkpoints import TRAIN_LOSS_FILE, checkpoint_loss_sum

    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    assert checkpoint_loss_sum(checkpoint) is None  # written before the sum was kept
    (checkpoint / TRAIN_LOSS_FILE).write_text(json.dumps({"global_step": 3, "loss_sum": 7.5}))
    assert checkpoint_loss_sum(checkpoint) == 7.5
    (checkpoint / TRAIN_LOSS_FILE).write_text(json.dumps({"global_step": 4, "loss_sum": 7.5}))
    assert checkpoint_loss_sum(checkpoint) is None  # copied from another checkpoint
    (checkpoint / TRAIN_LOSS_FILE).write_text("{")
    assert checkpoint_loss_sum(checkpoint) is None


def test_training_batches_group_sentences_of_similar_length(tmp_path):
    """`--group-by-length` (the default): each batch holds sentences of similar length, every sentence once
    per epoch, in an order fixed by seed and epoch (what resuming relies on) that changes between epochs."""
    from transformers import TrainingArguments

    from hf_elmo.pretraining.trainer import LanguageModelTrainer

    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 41, (400,), generator=generator).tolist()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(["w"] * n) + "\n" for n in lengths), encoding="utf-8")
    dataset = LineDataset(corpus, max_words=30)
    assert dataset.lengths.tolist() == [piece for n in lengths for piece in ([n] if n <= 30 else [30, n - 30])]

    def epoch_batches(group_by_length: bool, epoch: int) -> list[list[int]]:
        args = TrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=8, seed=3,
                                 use_cpu=True, report_to="none", remove_unused_columns=False)
        trainer = LanguageModelTrainer(model=torch.nn.Linear(1, 1), args=args, train_dataset=dataset,
                                       data_collator=lambda items: items, group_by_length=group_by_length)
        loader = trainer.get_train_dataloader()
        loader.set_epoch(epoch)
        return [[len(sentence) for sentence in batch] for batch in loader]

    def mean_spread(batches):
        return sum(max(batch) - min(batch) for batch in batches) / len(batches)

    grouped, shuffled = epoch_batches(True, 0), epoch_batches(False, 0)
    assert sorted(n for batch in grouped for n in batch) == sorted(dataset.lengths.tolist())
    assert mean_spread(grouped) < 0.25 * mean_spread(shuffled)
    assert epoch_batches(True, 0) == grouped
    assert epoch_batches(True, 1) != grouped


def test_dictionary_scheme_builds_a_character_vocabulary_trains_and_loads(tmp_path, capsys):
    from transformers import AutoModel, AutoTokenizer

    from hf_elmo.pretraining.data import build_character_vocabulary

    corpus = tmp_path / "train.txt"
    corpus.write_text("小米 粥 很 香\n小米 手机 很 好\n米 粥\n鑫\n" * 1 + "小米 粥\n" * 3, encoding="utf-8")
    characters = build_character_vocabulary([corpus], min_count=2)
    assert list(characters)[:7] == ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "米"]  # 米 is most frequent
    assert characters["<bos>"] == 1 and "鑫" not in characters and "粥" in characters
    output = tmp_path / "run"
    command = ["--train-file", str(corpus), "--dev-file", str(corpus), "--output-dir", str(output), "--min-count", "1",
               "--char-scheme", "dictionary", "--char-min-count", "2", "--max-characters", "6", "--epochs", "30",
               "--batch-size", "4", "--lr", "1e-2", "--eval-steps", "1000", "--save-steps", "1000", *TINY_ARGS]
    assert pretrain_main(command) == 0
    assert json.loads((output / "char_vocab.json").read_text(encoding="utf-8")) == characters
    summary = json.loads((output / "pretraining_summary.json").read_text())
    assert summary["eval_perplexity"] < 0.5 * summary["vocabulary_size"]  # an untrained model is near the vocabulary size
    tokenizer, model = AutoTokenizer.from_pretrained(output), AutoModel.from_pretrained(output)
    assert tokenizer.char_scheme == model.config.char_scheme == "dictionary"
    assert model.config.char_vocab_size == max(characters.values()) + 1 and model.config.max_characters_per_token == 6
    rows = tokenizer([["小米", "鑫"]], is_split_into_words=True)["input_ids"][0]
    assert rows[0] == [characters["<eow>"], characters["小"], characters["米"], characters["<bow>"],
                       characters["<pad>"], characters["<pad>"]]
    assert rows[1][1] == characters["<oov>"]  # seen once, below --char-min-count
    trained = ElmoForPreTraining.from_pretrained(output).elmo
    batch = tokenizer(["小米粥很香"], return_tensors="pt")
    torch.testing.assert_close(model(**batch).elmo_representations[0], trained(**batch).elmo_representations[0])
    # The scheme is part of the run: the same folder with the byte scheme is another run.
    bytes_command = [arg if arg != "dictionary" else "bytes" for arg in command]
    assert pretrain_main(bytes_command) == 2
    assert "--char-scheme 'dictionary' there, 'bytes' now" in capsys.readouterr().err
