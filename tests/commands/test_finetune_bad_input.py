"""`hf-elmo finetune` on bad input: each problem ends in one `error: ...` line and exit status 2, nothing written."""

import json

import pytest
import torch
from finetune_helpers import NOT_UTF8, save_tiny_base, toy_sentences, write_conll
from small_models import tiny_config

from hf_elmo import ElmoTokenizer
from hf_elmo.finetuning.conll import DataError, read_conll
from hf_elmo.finetuning.run import FinetuneOptions, train_classifier, train_tagger
from hf_elmo.cli import main as _hf_elmo
from hf_elmo.pretraining.language_model import ElmoForPreTraining
from hf_elmo.models.elmo.modeling_elmo import ElmoForTokenClassification
from hf_elmo.finetuning.predict import tag


def main(argv):
    """`hf-elmo finetune ...` in this process."""
    return _hf_elmo(["finetune", *argv])



@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A biLM, a pretraining run, a tagger and a sentence classifier, all tiny (a training step each)."""
    root = tmp_path_factory.mktemp("bad-input")
    base = save_tiny_base(root / "base")
    torch.manual_seed(0)
    ElmoForPreTraining(tiny_config(lm_vocab=["<S>", "</S>", "<UNK>", "a", "b"])).save_pretrained(root / "pretrained")
    ElmoTokenizer().save_pretrained(root / "pretrained")
    conll = write_conll(root / "train.txt", toy_sentences(12, 1))
    quick = dict(model=base, max_steps=1, per_device_train_batch_size=8, logging_steps=1000, task_encoder="linear")
    train_tagger(read_conll(conll), options=FinetuneOptions(output_dir=str(root / "tagger"), **quick))
    pairs = [("good film", "pos"), ("bad film", "neg"), ("very good", "pos"), ("so bad", "neg")]
    train_classifier(pairs, options=FinetuneOptions(output_dir=str(root / "classifier"), **quick))
    classification = root / "train.tsv"
    classification.write_text("".join(f"{label}\t{text}\n" for text, label in pairs), encoding="utf-8")
    return {
        "root": root,
        "base": base,
        "pretrained": str(root / "pretrained"),
        "tagger": str(root / "tagger"),
        "classifier": str(root / "classifier"),
        "conll": conll,
        "tsv": str(classification),
    }


def fails(argv, capsys) -> str:
    """Run the command, check it ends with one `hf-elmo: error:` line and status 2, and return that line."""
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err and err[-1].startswith("hf-elmo: error: "), err
    return err[-1]


def nothing_written(folder, before):
    assert sorted(p.name for p in folder.iterdir()) == before


# 1. --batch-size of predict / evaluate ---------------------------------------------------------


@pytest.mark.parametrize("command", ["predict", "evaluate"])
@pytest.mark.parametrize("size", ["0", "-1"])
def test_predict_and_evaluate_refuse_a_non_positive_batch_size(folders, capsys, command, size):
    data = ["--input", folders["tsv"]] if command == "predict" else ["--test", folders["conll"]]
    line = fails([command, "--model", folders["tagger"], *data, "--batch-size", size], capsys)
    assert "--batch-size" in line and size in line


def test_tag_refuses_a_non_positive_batch_size(folders):
    model = ElmoForTokenClassification.from_pretrained(folders["tagger"])
    with pytest.raises(ValueError, match="batch_size"):
        tag(model, ElmoTokenizer(), ["a b"], batch_size=0)


# 2. a folder of the wrong kind -------------------------------------------------------------------


@pytest.mark.parametrize("kind, command", [("pretrained", "predict"), ("base", "predict"), ("pretrained", "evaluate"),
                                           ("base", "evaluate"), ("classifier", "evaluate")])
def test_predict_and_evaluate_refuse_a_folder_they_cannot_use(folders, capsys, kind, command):
    data = ["张三"] if command == "predict" else ["--test", folders["conll"]]
    line = fails([command, "--model", folders[kind], *data], capsys)
    expected = "not a fine-tuned tagger or sentence classifier" if command == "predict" else "not a fine-tuned tagger:"
    assert expected in line


def test_predict_with_a_classifier_prints_labels_and_scores_one_line_per_input(folders, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("good film\n\nso bad\n", encoding="utf-8")
    assert main(["predict", "--model", folders["classifier"], "very good", "--input", str(texts)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["text"] for line in lines] == ["very good", "good film", "", "so bad"]
    for line in lines[:2] + lines[3:]:
        assert set(line["scores"]) == {"neg", "pos"} and line["label"] in ("neg", "pos")
        assert line["score"] == max(line["scores"].values()) == line["scores"][line["label"]]
        assert sum(line["scores"].values()) == pytest.approx(1.0)
    assert lines[2] == {"text": "", "words": [], "label": None, "score": None, "scores": {}}


def test_predict_refuses_a_tagger_folder_without_head_weights(folders, tmp_path, capsys):
    # A hand-made folder whose config.json says tagger but whose weights are a bare biLM.
    import shutil

    folder = tmp_path / "headless"
    shutil.copytree(folders["base"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["ElmoForTokenClassification"]
    (folder / "config.json").write_text(json.dumps(config))
    line = fails(["predict", "--model", str(folder), "a b"], capsys)
    assert "no tagger head" in line


@pytest.mark.parametrize(
    "command,kind,message",
    [("train", "classifier", "sentence classifier"), ("train-classifier", "tagger", "tagger")],
)
def test_training_refuses_a_fine_tuned_folder_of_the_other_kind(folders, tmp_path, capsys, command, kind, message):
    data = folders["conll"] if command == "train" else folders["tsv"]
    argv = [command, "--model", folders[kind], "--train", data, "--output-dir", str(tmp_path / "out")]
    line = fails(argv + ["--max-steps", "1"], capsys)
    assert message in line and "pretrained biLM" in line
    nothing_written(tmp_path, [])


def test_training_from_a_tagger_whose_head_does_not_fit(folders, tmp_path, capsys):
    # The same kind of head, but other labels: the head's weights cannot be loaded.
    other = tmp_path / "other.txt"
    other.write_text("a\tB-X\nb\tB-Y\nc\tO\n", encoding="utf-8")
    argv = ["train", "--model", folders["tagger"], "--train", str(other), "--output-dir", str(tmp_path / "out")]
    line = fails(argv + ["--max-steps", "1", "--task-encoder", "linear"], capsys)
    assert "pretrained biLM" in line
    assert not (tmp_path / "out").exists()


# 3. predict: one output line per input line ------------------------------------------------------


@pytest.mark.parametrize("split", [False, True])
def test_predict_prints_one_line_per_input_line_blank_lines_included(folders, tmp_path, capsys, split):
    inputs = tmp_path / "gap.txt"
    inputs.write_text("Alice met Bob\n\nRome\n   \n", encoding="utf-8")
    argv = ["predict", "--model", folders["tagger"], "--input", str(inputs)]
    assert main(argv + (["--split-into-words"] if split else [])) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["words"] for line in lines] == [["Alice", "met", "Bob"], [], ["Rome"], []]
    assert [line["tags"] for line in lines][1::2] == [[], []]
    assert lines[1]["entities"] == []


def test_predict_warns_when_pre_split_words_are_longer_than_the_model_reads(folders, capsys, caplog):
    """New-user trial: unsplit text given with --split-into-words was read as one cut word per sentence, silently."""
    sentence = "李娜明天要从上海回来然后我们一起去北京的天安门广场看升旗仪式再去故宫博物院参观最后回到酒店休息一下"
    assert len(sentence) > ElmoTokenizer.from_pretrained(folders["tagger"]).max_characters_per_token - 2
    with caplog.at_level("WARNING"):
        assert main(["predict", "--model", folders["tagger"], "--split-into-words", sentence, "Rome"]) == 0
    assert "1 of the words given with --split-into-words are longer than" in caplog.text
    assert [json.loads(line)["words"] for line in capsys.readouterr().out.splitlines()] == [[sentence], ["Rome"]]
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert main(["predict", "--model", folders["tagger"], "--split-into-words", "Alice met Bob"]) == 0
    assert "--split-into-words" not in caplog.text


def test_predict_help_says_blank_lines_give_empty_results(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "blank line" in " ".join(capsys.readouterr().out.split())


# 4. and 5. numeric options ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option,value",
    [
        ("--max-words", "0"),
        ("--max-words", "-1"),
        ("--epochs", "0"),
        ("--epochs", "-1"),
        ("--epochs", "nan"),
        ("--batch-size", "0"),
        ("--batch-size", "-2"),
        ("--eval-batch-size", "0"),
        ("--grad-accum", "0"),
        ("--dropout", "1.5"),
        ("--dropout", "-0.1"),
        ("--lr", "-1"),
        ("--lr", "0"),
        ("--weight-decay", "-1"),
        ("--max-steps", "0"),
        ("--max-steps", "-2"),
        ("--threads", "0"),
        ("--seed", "-1"),
        ("--hidden-size", "0"),
    ],
)
def test_train_refuses_out_of_range_numbers_before_any_work(tmp_path, capsys, option, value):
    train = write_conll(tmp_path / "train.txt", toy_sentences(4, 1))
    before = sorted(p.name for p in tmp_path.iterdir())
    # The model does not exist: the options are checked before anything is loaded.
    argv = ["train", "--model", str(tmp_path / "no-model"), "--train", train, "--output-dir", str(tmp_path / "out")]
    line = fails(argv + ["--task-encoder", "bilstm", option, value], capsys)
    assert option in line and value in line
    nothing_written(tmp_path, before)


@pytest.mark.parametrize("option,value", [("--classifier-hidden-size", "-5"), ("--batch-size", "0")])
def test_train_classifier_refuses_out_of_range_numbers(folders, tmp_path, capsys, option, value):
    argv = ["train-classifier", "--model", folders["base"], "--train", folders["tsv"]]
    line = fails(argv + ["--output-dir", str(tmp_path / "out"), option, value], capsys)
    assert option in line and value in line
    nothing_written(tmp_path, [])


def test_library_training_checks_options_too(folders):
    from hf_elmo.finetuning.run import OptionError

    sentences = read_conll(folders["conll"])
    with pytest.raises(OptionError, match="--epochs"):
        train_tagger(sentences, options=FinetuneOptions(model=folders["base"], num_train_epochs=0))
    with pytest.raises(OptionError, match="--grad-accum"):
        train_classifier([("a", "x"), ("b", "y")], options=FinetuneOptions(model=folders["base"],
                                                                        gradient_accumulation_steps=0))
    with pytest.raises(OptionError, match="--freeze must be True or False, got None"):
        train_tagger(sentences, options=FinetuneOptions(model=folders["base"], freeze=None))


# 6. unreadable input files -------------------------------------------------------------------------


def test_predict_reports_a_missing_input_file(folders, tmp_path, capsys):
    line = fails(["predict", "--model", folders["tagger"], "--input", str(tmp_path / "missing.txt")], capsys)
    assert "missing.txt" in line and "not found" in line


def test_predict_names_an_empty_input_file(folders, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert fails(["predict", "--model", folders["tagger"], "--input", str(empty)], capsys).endswith(f"nothing to tag: {empty} is empty")
    assert fails(["predict", "--model", folders["tagger"]], capsys).endswith("nothing to tag: give texts as arguments or --input FILE")


def test_training_data_given_twice_or_not_at_all_is_one_line(folders, tmp_path, capsys):
    out = ["--model", folders["base"], "--output-dir", str(tmp_path / "out")]
    assert fails(["train", *out], capsys).endswith("give the training data: --train FILE or --dataset NAME")
    assert fails(["train-classifier", *out], capsys).endswith("give the training data: --train FILE")
    assert fails(["train", *out, "--train", folders["conll"], "--dataset", "x"], capsys).endswith(
        "give --train or --dataset, not both")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["predict", "train-classifier", "train", "evaluate"])
def test_non_utf8_input_is_reported_with_file_and_line(folders, tmp_path, capsys, command):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\tfine\n" + NOT_UTF8)
    argv = {
        "predict": ["predict", "--model", folders["tagger"], "--input", str(bad)],
        "train-classifier": ["train-classifier", "--model", folders["base"], "--train", str(bad)],
        "train": ["train", "--model", folders["base"], "--train", str(bad)],
        "evaluate": ["evaluate", "--model", folders["tagger"], "--test", str(bad)],
    }[command]
    if command.startswith("train"):
        argv += ["--output-dir", str(tmp_path / "out")]
    line = fails(argv, capsys)
    assert f"{bad}:2: not UTF-8" in line and "0xff" in line
    nothing_written(tmp_path, ["bad.txt"])


# 7. a model name that leads nowhere -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["predict", "evaluate", "train", "train-classifier"])
def test_a_model_name_that_is_neither_a_folder_nor_on_the_hub(folders, tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    argv = {
        "predict": ["predict", "--model", "nosuch", "a b"],
        "evaluate": ["evaluate", "--model", "nosuch", "--test", folders["conll"]],
        "train": ["train", "--model", "nosuch", "--train", folders["conll"], "--output-dir", "out"],
        "train-classifier": ["train-classifier", "--model", "nosuch", "--train", folders["tsv"], "--output-dir", "out"],
    }[command]
    line = fails(argv, capsys)
    assert "no local folder" in line and "nosuch" in line and "Hub" in line
    nothing_written(tmp_path, [])


def test_a_model_path_that_does_not_exist(tmp_path, capsys):
    line = fails(["predict", "--model", str(tmp_path / "gone"), "a b"], capsys)
    assert "model folder not found" in line


# 8. a CoNLL file given to train-classifier ---------------------------------------------------------------


def test_train_classifier_refuses_a_word_tag_file(folders, tmp_path, capsys):
    argv = ["train-classifier", "--model", folders["base"], "--train", folders["conll"]]
    line = fails(argv + ["--output-dir", str(tmp_path / "out")], capsys)
    assert "label<TAB>text" in line and "finetune train" in line and folders["conll"] in line
    nothing_written(tmp_path, [])


def test_train_refuses_a_label_text_file(folders, tmp_path, capsys):
    reviews = tmp_path / "reviews.tsv"
    texts = ["东西坏了，客服不理", "东西很好，下次还来", "这个手机很好用", "太慢了", "包装不错"]
    reviews.write_text("".join(f"{'pos' if i % 2 else 'neg'}\t{texts[i % 5]}{i}\n" for i in range(24)), encoding="utf-8")
    line = fails(["train", "--model", folders["base"], "--train", str(reviews), "--output-dir", str(tmp_path / "out")],
                 capsys)
    assert "24 distinct tags for 24 words" in line and "train-classifier" in line and str(reviews) in line
    nothing_written(tmp_path, ["reviews.tsv"])
    from hf_elmo.finetuning.run import check_tagging_labels

    check_tagging_labels(read_conll(folders["conll"]))  # a real word<TAB>tag file passes
    from hf_elmo.finetuning.conll import TaggedSentence

    led_by_an_empty_sentence = [TaggedSentence([], [])] + [TaggedSentence(["pos"], [f"text {i}"]) for i in range(24)]
    with pytest.raises(DataError, match="the first word, 'pos', has the tag 'text 0'"):
        check_tagging_labels(led_by_an_empty_sentence)


def test_an_output_dir_that_is_a_file_is_refused_before_training(folders, tmp_path, capsys):
    plain = tmp_path / "plain.txt"
    plain.write_text("keep me\n", encoding="utf-8")
    line = fails(["train", "--model", folders["base"], "--train", folders["conll"], "--output-dir", str(plain),
                  "--overwrite"], capsys)
    assert "is a file, not a folder" in line and plain.read_text(encoding="utf-8") == "keep me\n"


def test_train_classifier_refuses_a_single_label(folders, tmp_path, capsys):
    one = tmp_path / "one.tsv"
    one.write_text("pos\tgood\npos\tfine\npos\tgreat\n", encoding="utf-8")
    line = fails(["train-classifier", "--model", folders["base"], "--train", str(one), "--output-dir",
                  str(tmp_path / "out")], capsys)
    assert "only one label" in line


# Interrupted and concurrent runs, damaged checkpoints -------------------------------------------------------

# Ctrl-C while torch is half imported (the first seconds of a run): stands in for the signal at that moment.
INTERRUPTED_WHILE_TORCH_IMPORTS = """
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "torch.nn":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["/somewhere/bin/hf-elmo", *sys.argv[1:]]  # as the console script runs
from hf_elmo.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize("command", ["train", "train-classifier"])
def test_ctrl_c_while_torch_imports_is_one_line_and_status_130(folders, tmp_path, command):
    import subprocess
    import sys

    from paths import REPO_ROOT

    data = folders["conll"] if command == "train" else folders["tsv"]
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WHILE_TORCH_IMPORTS, "finetune", command, "--model", folders["base"],
         "--train", data, "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 130 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("hf-elmo: interrupted; nothing was written to") and not (tmp_path / "out").exists()


def test_ctrl_c_while_torch_imports_names_the_checkpoint_a_rerun_resumes_from(folders, tmp_path):
    """The line after the signal looks the checkpoint up without importing torch (which cannot be imported again
    after an interrupted import)."""
    import subprocess
    import sys

    from paths import REPO_ROOT

    from hf_elmo.utils.checkpoints import checkpoint_folder_for

    checkpoints = checkpoint_folder_for(tmp_path / "out")
    for step, finished in ((2, True), (3, False)):  # checkpoint-3's save never finished
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
        if finished:
            (checkpoints / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WHILE_TORCH_IMPORTS, "finetune", "train-classifier", "--model",
         folders["base"], "--train", folders["tsv"], "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 130 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].endswith(f"the same command resumes from {checkpoints / 'checkpoint-2'}")


def _interrupted_classifier_run(folders, tmp_path, monkeypatch):
    """A train-classifier run stopped after its training, before its output: (its command line, its checkpoints)."""
    import hf_elmo.finetuning.run as finetune

    argv = ["train-classifier", "--model", folders["base"], "--train", folders["tsv"], "--output-dir",
            str(tmp_path / "out"), "--epochs", "2", "--batch-size", "2", "--threads", "1"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(finetune, "save_folder", interrupted)
        assert main(argv) == 130
    checkpoints = finetune.checkpoint_folder_for(tmp_path / "out")
    assert (checkpoints / "run_options.json").is_file() and list(checkpoints.glob("checkpoint-*/rng_state.pth"))
    return argv, checkpoints


def test_a_damaged_or_code_running_checkpoint_file_is_refused_naming_it(folders, tmp_path, monkeypatch, capsys):
    argv, checkpoints = _interrupted_classifier_run(folders, tmp_path, monkeypatch)
    capsys.readouterr()
    (rng_state,) = checkpoints.glob("checkpoint-*/rng_state.pth")
    original = rng_state.read_bytes()
    rng_state.write_bytes(original[: len(original) // 2])
    error = fails(argv, capsys)
    assert f"is damaged: {rng_state} is not a complete torch file" in error

    class RunsCode:
        def __reduce__(self):
            return (open, (str(tmp_path / "ran"), "w"))

    torch.save({"python": RunsCode()}, rng_state)
    error = fails(argv, capsys)
    assert f"{rng_state} cannot be loaded as plain tensors, so it is refused" in error
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
    rng_state.write_bytes(original)
    assert main(argv) == 0  # the intact checkpoint resumes
    assert json.loads((tmp_path / "out" / "results.json").read_text())["resumed_from"].startswith("checkpoint-")
    assert not checkpoints.exists()


def test_a_run_recorded_before_a_newer_option_resumes(folders, tmp_path, monkeypatch, capsys):
    """A run record lacking an option added since (`added_later`: the run had its default) is the same run."""
    import hf_elmo.finetuning.run as finetune

    argv, checkpoints = _interrupted_classifier_run(folders, tmp_path, monkeypatch)
    record = checkpoints / "run_options.json"
    recorded = json.loads(record.read_text())
    del recorded["weight_decay"]  # as if the option were newer than the run
    record.write_text(json.dumps(recorded))
    capsys.readouterr()
    assert "(--weight-decay None there, 0.0 now)" in fails(argv, capsys)  # not added_later: another run
    monkeypatch.setattr(finetune, "OPTIONS_ADDED_LATER", {"weight_decay": 0.0})
    assert main(argv) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["resumed_from"].startswith("checkpoint-")
    assert not checkpoints.exists()


FIRST_RUN = """
import sys, time
from hf_elmo.utils.checkpoints import checkpoint_folder_for, create_run_folder
from hf_elmo.utils.io import output_lock
with output_lock(sys.argv[1]):
    create_run_folder(checkpoint_folder_for(sys.argv[1]), {"the": "first run"})
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_run_into_the_same_output_is_refused_while_the_first_runs(folders, tmp_path, capsys):
    import subprocess
    import sys

    from hf_elmo.utils.checkpoints import checkpoint_folder_for

    argv = ["train-classifier", "--model", folders["base"], "--train", folders["tsv"], "--output-dir",
            str(tmp_path / "out"), "--max-steps", "1", "--threads", "1"]
    first = subprocess.Popen([sys.executable, "-c", FIRST_RUN, str(tmp_path / "out")], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        error = fails(argv, capsys)
        assert f"is being written by another hf-elmo run (pid {first.pid} on " in error
    finally:
        first.kill()
        first.wait()
    checkpoints = checkpoint_folder_for(tmp_path / "out")
    assert json.loads((checkpoints / "run_options.json").read_text()) == {"the": "first run"}  # untouched


def test_checkpoints_without_the_record_of_their_run_are_named_not_listed_option_by_option(folders, tmp_path, capsys):
    from hf_elmo.utils.checkpoints import checkpoint_folder_for

    checkpoints = checkpoint_folder_for(tmp_path / "out")
    (checkpoints / "checkpoint-2").mkdir(parents=True)
    argv = ["train-classifier", "--model", folders["base"], "--train", folders["tsv"], "--output-dir",
            str(tmp_path / "out"), "--max-steps", "1", "--threads", "1"]
    error = fails(argv, capsys)
    assert f"{checkpoints} holds checkpoints without the record of their run (run_options.json)" in error
    assert "--lr" not in error
