"""The fine-tuning entry point: data checks, Trainer round trip, predict / evaluate / pipeline."""

import json
import logging
import re

import pytest
import torch
from finetune_helpers import (
    CHINESE_FILLER, CHINESE_PEOPLE, CHINESE_PLACES, LEARNABLE, save_tiny_base, toy_sentences, write_conll,
)
from transformers import AutoModelForTokenClassification, pipeline

from hf_elmo import ElmoDataCollator, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoTokenizer
from hf_elmo.finetuning.conll import read_conll
from hf_elmo.loading import ModelNotFoundError
from hf_elmo.finetuning.run import FinetuneOptions, evaluate_tagger, predict_tags, train_tagger
from hf_elmo.finetuning.predict import tag
from paths import REPO_ROOT
from hf_elmo.cli import main as _hf_elmo


def main(argv):
    """`hf-elmo finetune ...` in this process."""
    return _hf_elmo(["finetune", *argv])



@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    base = save_tiny_base(root / "base", **LEARNABLE)
    files = {
        split: write_conll(root / f"{split}.txt", toy_sentences(n, seed))
        for split, n, seed in (("train", 160, 1), ("dev", 30, 2), ("test", 30, 3))
    }
    options = FinetuneOptions(
        model=base,
        output_dir=str(root / "tagger"),
        task_encoder="bilstm",
        task_encoder_hidden_size=16,
        use_crf=True,
        dropout=0.0,
        num_train_epochs=6,
        learning_rate=5e-2,
        per_device_train_batch_size=16,
        seed=0,
        logging_steps=1000,
    )
    run = train_tagger(read_conll(files["train"]), read_conll(files["dev"]), read_conll(files["test"]), options)
    return {"root": root, "base": base, "files": files, "folder": str(root / "tagger"), **run}


@pytest.mark.parametrize("freeze, epochs, learning_rate", [(True, None, None), (False, None, None), (True, 2.0, 1e-2)])
def test_epochs_and_learning_rate_default_per_task_and_freezing(trained, tmp_path, freeze, epochs, learning_rate):
    from hf_elmo.finetuning.run import train_classifier

    options = FinetuneOptions(model=trained["base"], freeze=freeze, num_train_epochs=epochs,
                              learning_rate=learning_rate, max_steps=1, logging_steps=1000,
                              load_best_model_at_end=False)
    sentences = read_conll(write_conll(tmp_path / "train.txt", toy_sentences(4, 1)))
    tagger = train_tagger(sentences, options=options)["results"]["options"]
    classifier = train_classifier([("good film", "pos"), ("bad film", "neg")], options=options)["results"]["options"]
    given = epochs is not None
    assert (tagger["num_train_epochs"], tagger["learning_rate"]) == (
        (2.0, 1e-2) if given else (10.0, 5e-3 if freeze else 1e-3))
    assert (classifier["num_train_epochs"], classifier["learning_rate"]) == ((2.0, 1e-2) if given else (3.0, 1e-3))
    assert (tagger["dropout"], classifier["dropout"]) == (0.3, None)  # None: the config's 0.5


def train_loss(model, sentences):
    label2id = model.config.label2id
    examples = [{"words": w, "labels": [label2id[t] for t in tags]} for w, tags in sentences]
    batch = ElmoDataCollator(ElmoTokenizer())(examples)
    with torch.no_grad():
        return model.eval()(**batch).loss.item()


def test_training_learns_and_reports_seqeval_scores(trained):
    results = trained["results"]
    assert results["labels"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    for split in ("dev", "test"):
        scores = results[split]
        assert {"precision", "recall", "f1", "accuracy", "PER_f1", "LOC_f1", "PER_support"} <= set(scores)
    train = toy_sentences(160, 1)
    untrained = ElmoForTokenClassification.from_pretrained(
        trained["base"],
        num_labels=5,
        id2label=dict(enumerate(results["labels"])),
        label2id={label: i for i, label in enumerate(results["labels"])},
        task_encoder="bilstm",
        task_encoder_hidden_size=16,
        use_crf=True,
    )
    assert train_loss(trained["model"], train) < 0.5 * train_loss(untrained, train)
    assert results["test"]["f1"] > 0.8


def test_saved_folder_reloads_and_predicts_identically(trained):
    folder = trained["folder"]
    reloaded = ElmoForTokenClassification.from_pretrained(folder).eval()
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    sentences = [words for words, _ in toy_sentences(30, 3)]
    assert predict_tags(reloaded, tokenizer, sentences) == predict_tags(
        trained["model"], trained["tokenizer"], sentences
    )
    inputs = ElmoTokenizer()(sentences[:4], is_split_into_words=True, padding=True, return_tensors="pt")
    torch.testing.assert_close(reloaded(**inputs).logits, trained["model"].eval()(**inputs).logits)
    saved = json.loads((trained["root"] / "tagger" / "results.json").read_text())
    assert evaluate_tagger(reloaded, tokenizer, read_conll(trained["files"]["test"])) == saved["test"]
    assert not [p for p in trained["root"].iterdir() if p.name.startswith(".")]  # no temp folders left


def test_cli_predict_and_evaluate(trained, capsys):
    text = "Alice met Bob in New York ."
    assert main(["predict", "--model", trained["folder"], text]) == 0
    printed = json.loads(capsys.readouterr().out.strip())
    expected = tag(trained["model"], trained["tokenizer"], text)[0]
    assert printed == json.loads(json.dumps(expected))
    assert printed["words"] == text.split()
    for entity in printed["entities"]:
        assert text[entity["start"] : entity["end"]] == entity["word"]

    assert main(["evaluate", "--model", trained["folder"], "--test", trained["files"]["test"]]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores == trained["results"]["test"]


def test_pipeline_matches_tag(trained):
    """The saved folder names its pipeline (custom_pipelines), which transformers prefers to a registered task of the
    same name and runs as the folder's remote code: trust_remote_code=True, with or without hf-elmo (issue 41: the
    config no longer depends on what the process imported)."""
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline("elmo-token-classification", model=trained["folder"])
    tagger = pipeline("elmo-token-classification", model=trained["folder"], trust_remote_code=True)
    text = "Carol Smith went to Rome and Oslo ."
    entities = tagger(text)
    expected = tag(trained["model"], trained["tokenizer"], text)[0]["entities"]
    assert [(e["entity"], e["start"], e["end"]) for e in entities] == [
        (e["entity"], e["start"], e["end"]) for e in expected
    ]
    for got, want in zip(entities, expected):
        assert got["score"] == pytest.approx(want["score"], rel=1e-5)


def test_pipeline_batches_give_the_unbatched_results(trained):
    tagger = pipeline("elmo-token-classification", model=trained["folder"], trust_remote_code=True)
    texts = ["Carol Smith went to Rome and Oslo .", "Oslo", "", "Bob and Carol Smith met in Rome last year ."]
    one_by_one = [tagger(text, return_tags=True) for text in texts]
    for batch_size in (1, 2, 3):
        batched = tagger(texts, batch_size=batch_size, return_tags=True)
        assert len(batched) == len(texts)
        for got, want in zip(batched, one_by_one):
            assert got["words"] == want["words"] and got["tags"] == want["tags"]
            assert [e["score"] for e in got["entities"]] == pytest.approx([e["score"] for e in want["entities"]], rel=1e-5)


def test_predict_tags_is_tag_without_scores(trained):
    model, tokenizer = trained["model"], trained["tokenizer"]
    sentences = [words for words, _ in toy_sentences(12, 5)]
    tagged = tag(model, tokenizer, sentences, is_split_into_words=True, batch_size=5)
    assert predict_tags(model, tokenizer, sentences, batch_size=5) == [result["tags"] for result in tagged]
    # Words past max_words are tagged O, so the tags still line up with the words.
    cut = predict_tags(model, tokenizer, sentences, max_words=2)
    assert [tags[:2] for tags in cut] == predict_tags(model, tokenizer, [words[:2] for words in sentences])
    assert all(set(tags[2:]) <= {"O"} and len(tags) == len(words) for tags, words in zip(cut, sentences))


def test_chinese_text_is_segmented_for_prediction(trained):
    tokenizer = ElmoTokenizer(segmenter="jieba")
    text = "我们在北京工作。"
    result = tag(trained["model"], tokenizer, text)[0]
    assert result["words"] == tokenizer.tokenize(text) == ["我们", "在", "北京", "工作", "。"]
    assert len(result["tags"]) == 5


def test_cli_train_writes_a_loadable_folder(trained, tmp_path, capsys):
    out = tmp_path / "cli"
    argv = [
        "train",
        "--model",
        trained["base"],
        "--train",
        trained["files"]["train"],
        "--dev",
        trained["files"]["dev"],
        "--output-dir",
        str(out),
        "--task-encoder",
        "linear",
        "--max-steps",
        "2",
        "--batch-size",
        "8",
    ]
    assert main(argv) == 0
    assert "dev:" in capsys.readouterr().out
    model = ElmoForTokenClassification.from_pretrained(out)
    assert model.config.task_encoder == "linear" and not model.config.use_crf
    assert main(argv) == 2  # refuses to overwrite
    assert "already exists" in capsys.readouterr().err
    assert not model.config.task_token_features
    with_x = [str(tmp_path / "with-x") if arg == str(out) else arg for arg in argv] + ["--token-features"]
    assert main(with_x) == 0
    with_own_vectors = ElmoForTokenClassification.from_pretrained(tmp_path / "with-x")
    assert with_own_vectors.config.task_token_features and with_own_vectors.token_features is not None


# Bad input ------------------------------------------------------------------------------------


def test_cli_reports_bad_files_without_writing(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("a\tO\nb\n", encoding="utf-8")
    code = main(["train", "--model", "unused", "--train", str(bad), "--output-dir", str(tmp_path / "out")])
    assert code == 2
    assert f"{bad}:2: expected" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_train_classifier(trained, tmp_path, capsys):
    train = tmp_path / "train.tsv"
    train.write_text("pos\tgood film\nneg\tbad film\npos\tvery good\nneg\tso bad\n", encoding="utf-8")
    out = tmp_path / "classifier"
    argv = ["train-classifier", "--model", trained["base"], "--train", str(train), "--dev", str(train)]
    assert main(argv + ["--output-dir", str(out), "--max-steps", "2", "--batch-size", "2"]) == 0
    assert "dev: accuracy" in capsys.readouterr().out
    model = ElmoForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "neg", 1: "pos"}
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "sequence-classification" and 0.0 <= results["dev"]["accuracy"] <= 1.0

    bad = tmp_path / "bad.tsv"
    bad.write_text("pos\tfine\nno tab here\n", encoding="utf-8")
    assert main(["train-classifier", "--model", trained["base"], "--train", str(bad), "--output-dir",
                 str(tmp_path / "not-made")]) == 2
    assert f"{bad}:2: expected 'label<TAB>text'" in capsys.readouterr().err


def test_cli_predict_reads_pre_split_words_from_a_file(trained, tmp_path, capsys):
    inputs = tmp_path / "in.txt"
    inputs.write_text("Alice went to New York\n\nBob saw Rome\n", encoding="utf-8")
    assert main(["predict", "--model", trained["folder"], "--input", str(inputs), "--split-into-words"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    # The blank line gets an empty result, so output line N belongs to input line N.
    assert [line["words"] for line in lines] == [["Alice", "went", "to", "New", "York"], [], ["Bob", "saw", "Rome"]]
    assert all(len(line["tags"]) == len(line["words"]) for line in lines)


def test_a_training_run_says_which_weights_are_new_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    base = save_tiny_base(tmp_path / "base")
    data = write_conll(tmp_path / "train.txt", toy_sentences(8, 1))
    repo = REPO_ROOT
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "hf_elmo.cli", "finetune", "train", "--model", base, "--train", data, "--max-steps", "1",
         "--output-dir", str(tmp_path / "tagger")],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "new ElmoForTokenClassification weights" in run.stderr and "classifier" in run.stderr
    assert "MISSING" not in run.stderr and "pin_memory" not in run.stderr


def test_a_base_folder_missing_biLM_weights_is_refused_naming_them(tmp_path):
    from safetensors.torch import load_file, save_file

    base = save_tiny_base(tmp_path / "base")
    weights = load_file(f"{base}/model.safetensors")
    dropped = next(name for name in weights if "bilstm" in name)
    save_file({name: value for name, value in weights.items() if name != dropped}, f"{base}/model.safetensors",
              metadata={"format": "pt"})
    options = FinetuneOptions(model=base, max_steps=1, per_device_train_batch_size=4, logging_steps=1000,
                              task_encoder="linear")
    # Issue 37: a biLM with random tensors is not a pretrained one; it used to train with a warning.
    with pytest.raises(ModelNotFoundError, match=rf"lack 1 of the biLM's tensors \(elmo\.{re.escape(dropped)}\)"):
        train_tagger(read_conll(write_conll(tmp_path / "train.txt", toy_sentences(8, 1))), options=options)


# Resume ---------------------------------------------------------------------------------------


def test_killed_training_resumes_and_ends_bit_identical_to_an_uninterrupted_run(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from hf_elmo.finetuning.run import checkpoint_folder_for

    base = save_tiny_base(tmp_path / "base", **LEARNABLE)
    train = write_conll(tmp_path / "train.txt", toy_sentences(160, 1))
    dev = write_conll(tmp_path / "dev.txt", toy_sentences(30, 2))

    def command(output, *extra):
        return [sys.executable, "-m", "hf_elmo.cli", "finetune", "train", "--model", base, "--train", train,
                "--dev", dev, "--output-dir", str(output), "--epochs", "8", "--batch-size", "4", "--dropout", "0.2",
                "--no-precompute-elmo", "--threads", "1", "--seed", "3", *extra]

    subprocess.run(command(tmp_path / "straight"), cwd=REPO_ROOT, check=True, capture_output=True, timeout=600)
    assert not checkpoint_folder_for(tmp_path / "straight").exists()  # removed once the output is written

    killed = tmp_path / "killed"
    checkpoints = checkpoint_folder_for(killed)
    process = subprocess.Popen(command(killed), cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not any((path / "trainer_state.json").is_file() for path in checkpoints.glob("checkpoint-*")):
        assert process.poll() is None, "training ended before it could be interrupted"
        assert time.time() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not killed.exists() and checkpoints.is_dir()

    other = subprocess.run(command(killed, "--lr", "0.01"), cwd=REPO_ROOT, capture_output=True, text=True)
    assert other.returncode == 2 and "other options (--lr 0.005 there, 0.01 now)" in other.stderr, other.stderr[-2000:]
    assert checkpoints.is_dir() and not killed.exists()

    subprocess.run(command(killed), cwd=REPO_ROOT, check=True, capture_output=True, timeout=600)
    assert json.loads((killed / "results.json").read_text())["resumed_from"].startswith("checkpoint-")
    assert not checkpoints.exists()
    straight = ElmoForTokenClassification.from_pretrained(tmp_path / "straight").state_dict()
    resumed = ElmoForTokenClassification.from_pretrained(killed).state_dict()
    for name, value in straight.items():
        assert torch.equal(resumed[name], value), name


# Character-labelled data (MSRA-like) over a biLM of words ------------------------------------------------

def test_character_labelled_files_are_read_as_words_and_tagged_per_character(tmp_path, capsys, caplog):
    base = save_tiny_base(tmp_path / "base", **LEARNABLE)  # its tokenizer segments with jieba
    chinese = dict(people=CHINESE_PEOPLE, places=CHINESE_PLACES, filler=CHINESE_FILLER, words_per_sentence=(2, 6))
    files = {split: write_conll(tmp_path / f"{split}.txt", toy_sentences(n, seed, **chinese))
             for split, n, seed in (("train", 120, 1), ("dev", 30, 2))}
    argv = ["train", "--model", base, "--train", files["train"], "--dev", files["dev"], "--output-dir",
            str(tmp_path / "chars"), "--use-crf", "--hidden-size", "16", "--dropout", "0", "--epochs", "8",
            "--lr", "5e-2", "--batch-size", "16", "--seed", "0"]
    with caplog.at_level(logging.INFO, logger="hf_elmo.finetuning.run"):
        assert main(argv) == 0  # detected: every token is one Chinese character
    assert "characters labelled" in caplog.text
    assert "read as character-labelled: 100.0% of its tokens are one character each (from 90% on)" in caplog.text
    # Its own class, which transformers' Auto class loads as what it is.
    model = AutoModelForTokenClassification.from_pretrained(tmp_path / "chars")
    tokenizer = ElmoTokenizer.from_pretrained(tmp_path / "chars")
    assert type(model).__name__ == "ElmoForCharacterTagging" and model.labels_characters
    results = json.loads((tmp_path / "chars" / "results.json").read_text())
    assert results["dev"]["f1"] > 0.9, results["dev"]
    dev = read_conll(files["dev"])
    assert evaluate_tagger(model, tokenizer, dev)["f1"] == results["dev"]["f1"]
    # (Sentences jieba cuts at the entities' edges: "张三去了" would be cut 张三去 / 了.)
    predicted = predict_tags(model, tokenizer, [list("我们在北京和李四")])[0]
    assert predicted == ["O", "O", "O", "B-LOC", "I-LOC", "O", "B-PER", "I-PER"]
    tagged = tag(model, tokenizer, "今天李四在上海。")[0]
    assert tagged["words"] == list("今天李四在上海。") and tagged["tags"][2:4] == ["B-PER", "I-PER"]
    assert [(e["entity"], e["word"], e["start"]) for e in tagged["entities"]] == [("PER", "李四", 2), ("LOC", "上海", 5)]
    tagger = pipeline("elmo-token-classification", model=model, tokenizer=tokenizer)
    assert tagger("今天李四在上海。") == tagged["entities"]
    texts = ["今天李四在上海。", "北京", "", "我们在北京和李四见面了"]
    one_by_one = [tagger(text, return_tags=True) for text in texts]
    assert [result["tags"] for result in tag(model, tokenizer, texts)] == [result["tags"] for result in one_by_one]
    for got, want in zip(tagger(texts, batch_size=3, return_tags=True), one_by_one):  # padded batches, same results
        assert got["tags"] == want["tags"]
        assert [e["score"] for e in got["entities"]] == pytest.approx([e["score"] for e in want["entities"]], rel=1e-5)
    # Asked for one character a word, the same data trains the plain word tagger.
    off = [str(tmp_path / "off") if arg == str(tmp_path / "chars") else arg for arg in argv] + ["--no-label-characters"]
    assert main(off + ["--max-steps", "1"]) == 0
    assert type(AutoModelForTokenClassification.from_pretrained(tmp_path / "off")) is ElmoForTokenClassification


def test_per_character_features_on_data_read_as_words_say_why_and_how_to_ask_for_characters(tmp_path, capsys):
    base = save_tiny_base(tmp_path / "base")
    words = write_conll(tmp_path / "words.txt", toy_sentences(8, 1))  # English words: no token is a CJK character
    argv = ["train", "--model", base, "--train", words, "--output-dir", str(tmp_path / "out"), "--token-features",
            "--character-features", "--max-steps", "1"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert re.search(r"--character-features is for character-labelled data read as jieba words, but the training "
                     r"data is read as words: \d+\.\d% of its tokens are one character each \(character-labelled "
                     r"from 90% on\); pass --label-characters", error), error
    assert not (tmp_path / "out").exists()


def test_character_features_train_save_and_tag(tmp_path, capsys):
    base = save_tiny_base(tmp_path / "base", **LEARNABLE)
    chinese = dict(people=CHINESE_PEOPLE, places=CHINESE_PLACES, filler=CHINESE_FILLER, words_per_sentence=(2, 6))
    train = write_conll(tmp_path / "train.txt", toy_sentences(40, 1, **chinese))
    argv = ["train", "--model", base, "--train", train, "--dev", train, "--output-dir", str(tmp_path / "out"),
            "--hidden-size", "8", "--epochs", "1", "--batch-size", "16", "--token-features"]
    assert main(argv[:-1] + ["--character-features"]) == 2
    assert "--character-features gives each character the head's own vector x_k" in capsys.readouterr().err
    assert main(argv + ["--character-features", "--no-label-characters"]) == 2
    assert main(argv) == 0  # on by default with --token-features; the biLM layers precomputed, the characters too
    model = AutoModelForTokenClassification.from_pretrained(tmp_path / "out")
    tokenizer = ElmoTokenizer.from_pretrained(tmp_path / "out")
    assert model.config.task_character_features and model.labels_characters
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert evaluate_tagger(model, tokenizer, read_conll(train))["f1"] == results["dev"]["f1"]
    tagged = tag(model, tokenizer, "今天李四在上海。")[0]
    assert tagged["words"] == list("今天李四在上海。")
    assert pipeline("elmo-token-classification", model=model, tokenizer=tokenizer)("今天李四在上海。") == tagged["entities"]
    assert len(predict_tags(model, tokenizer, [list("我们在北京")])[0]) == 5
    assert main(argv + ["--no-character-features", "--max-steps", "1", "--overwrite"]) == 0
    assert not AutoModelForTokenClassification.from_pretrained(tmp_path / "out").config.task_character_features
