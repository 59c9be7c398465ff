"""conversion/convert_allennlp.py: AllenNLP / bilm-tf hdf5 <-> hf-elmo folders, exact, atomic, with clear errors."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from numerics import bilm_tolerance
from reference_fixtures import ALLENNLP, REFERENCES
from small_models import tiny_config_kwargs
from transformers import AutoModel, AutoTokenizer
from paths import REPO_ROOT

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run

ROOT = REPO_ROOT
SCRIPT = ROOT / "conversion" / "convert_allennlp.py"
OPTIONS = ALLENNLP / "options.json"
WEIGHTS = ALLENNLP / "lm_weights.hdf5"


def load_cli():
    spec = importlib.util.spec_from_file_location("convert_allennlp", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CLI = load_cli()


def run_cli(capsys, *args):
    code = CLI.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.err


def read_datasets(path) -> dict[str, np.ndarray]:
    arrays = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(lambda name, item: arrays.__setitem__(name, item[...]) if isinstance(item, h5py.Dataset) else None)
    return arrays


def write_datasets(path, arrays):
    with h5py.File(path, "w") as handle:
        for name, value in arrays.items():
            handle.create_dataset(name, data=value)


def entries(folder) -> set[str]:
    return set(os.listdir(folder))


# The CLI end to end ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    parent = tmp_path_factory.mktemp("cli")
    output = parent / "elmo-test"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--options", str(OPTIONS), "--weights", str(WEIGHTS), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"wrote {output}" in result.stderr
    assert entries(parent) == {"elmo-test"}  # no temporary folder left beside it
    return output


def test_cli_writes_a_loadable_folder(converted):
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= entries(converted)
    assert json.loads((converted / "config.json").read_text())["model_type"] == "elmo"
    mode = os.stat(converted).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o777 & ~umask  # not the private 0700 of a temporary folder


def test_converted_folder_reproduces_fixture_batch_0(converted):
    model = AutoModel.from_pretrained(converted).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert isinstance(model, ElmoModel) and isinstance(tokenizer, ElmoTokenizer)
    reference = REFERENCES[0]
    words = reference.batches()[0]
    with torch.no_grad():
        output = model(**tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt"))
    for row, sentence in enumerate(words):
        expected = reference.expected_top_layer(row, 0)
        assert np.abs(output.last_hidden_state[row, : len(sentence)].numpy() - expected).max() <= bilm_tolerance(model.config, expected)


def test_converted_tokenizer_reads_raw_text_as_allennlp_did(converted, capsys):
    """Issue 45: the converter gave every AllenNLP / bilm-tf model jieba with punctuation splitting, so "U.S." became
    `U . S .` and a 50-token sentence of AllenNLP's fixture 53 words, with other vectors than AllenNLP's. A converted
    folder's tokenizer now splits raw text on whitespace, as the model's training text was: the raw sentences of the
    fixture give AllenNLP's tokens, and, with the state carried from batch to batch as AllenNLP did, its vectors for
    all 30 sentences; `hf-elmo info` names the segmenter."""
    from hf_elmo.cli import main as hf_elmo

    model = AutoModel.from_pretrained(converted).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert tokenizer.segmenter == "whitespace"
    reference = REFERENCES[0]
    sentences = json.loads((reference.folder / reference.sentences_file).read_text(encoding="utf-8"))
    state = None
    for batch_index, tokens in enumerate(reference.batches()):
        texts = [sentences[row][batch_index] for row in range(3)]  # the raw lines, not word lists
        assert [tokenizer.tokenize(text) for text in texts] == tokens
        encoded = tokenizer(texts, padding=True, return_tensors="pt", return_words=True)
        assert encoded.pop("words") == tokens
        with torch.no_grad():
            output = model(**encoded, initial_state=state, return_state=True)
        state = output.final_state
        for row, words in enumerate(tokens):
            expected = reference.expected_top_layer(row, batch_index)
            got = output.last_hidden_state[row, : len(words)].numpy()
            assert got.shape == expected.shape
            assert np.abs(got - expected).max() <= bilm_tolerance(model.config, expected), (batch_index, row)
    assert hf_elmo(["info", "--json", "--model", str(converted)]) == 0
    assert json.loads(capsys.readouterr().out)["segmenter"] == "whitespace"
    assert hf_elmo(["info", "--model", str(converted)]) == 0
    assert "segmentation: whitespace (" in capsys.readouterr().out


@pytest.mark.parametrize("segmenter", ["jieba", "chars"])
def test_a_chinese_bilm_tf_model_gets_the_segmenter_asked_for(segmenter, tmp_path, capsys):
    """Issue 45: a Chinese bilm-tf model trained on jieba words (or single characters) keeps that segmentation with
    `--segmenter`; `hf-elmo info` shows it."""
    from hf_elmo.cli import main as hf_elmo

    code, _ = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", tmp_path / "zh",
                      "--segmenter", segmenter)
    assert code == 0
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "zh")
    assert tokenizer.segmenter == segmenter
    words = tokenizer.tokenize("我爱北京天安门，U.S.")
    assert words == (["我", "爱", "北京", "天安门", "，", "U", ".", "S", "."] if segmenter == "jieba"
                     else ["我", "爱", "北", "京", "天", "安", "门", "，", "U", ".", "S", "."])
    assert hf_elmo(["info", "--json", "--model", str(tmp_path / "zh")]) == 0
    assert json.loads(capsys.readouterr().out)["segmenter"] == segmenter


def test_hf_elmo_convert_and_the_python_converter_default_to_whitespace(tmp_path):
    from hf_elmo.convert.bilm_hdf5 import convert_bilm_to_folder
    from hf_elmo.cli import main as hf_elmo

    assert hf_elmo(["convert", str(tmp_path / "cli"), "--from", "allennlp", "--options", str(OPTIONS), "--weights",
                    str(WEIGHTS)]) == 0
    convert_bilm_to_folder(OPTIONS, WEIGHTS, tmp_path / "python")
    for folder in ("cli", "python"):
        tokenizer = AutoTokenizer.from_pretrained(tmp_path / folder)
        assert tokenizer.segmenter == "whitespace" and tokenizer.tokenize("didn't U.S. 北京") == ["didn't", "U.S.", "北京"]


def test_cli_error_in_a_subprocess(tmp_path):
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(b"definitely not hdf5")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--options", str(OPTIONS), "--weights", str(bad), "--output", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("hf-elmo: error: ") and "Traceback" not in result.stderr
    assert entries(tmp_path) == {"bad.hdf5"}


# Reverse export, bit-exact round trips -----------------------------------------------------------


@pytest.mark.parametrize("reference", REFERENCES, ids=lambda reference: reference.name)
def test_hdf5_to_folder_to_hdf5_is_bit_exact(reference, tmp_path, capsys):
    assert run_cli(capsys, "--options", reference.options, "--weights", reference.weights, "--output", tmp_path / "hf")[0] == 0
    assert run_cli(capsys, "--reverse", "--model", tmp_path / "hf", "--output", tmp_path / "bilm")[0] == 0
    assert entries(tmp_path / "bilm") == {"options.json", "weights.hdf5"}
    original, exported = read_datasets(reference.weights), read_datasets(tmp_path / "bilm" / "weights.hdf5")
    assert sorted(original) == sorted(exported) and len(original) == 33
    for name, value in original.items():
        assert exported[name].dtype == value.dtype and exported[name].shape == value.shape, name
        assert exported[name].tobytes() == value.tobytes(), name
    options = json.loads((tmp_path / "bilm" / "options.json").read_text())
    assert options == json.loads(reference.options.read_text())


def test_folder_to_hdf5_to_folder_is_exact(tmp_path, capsys):
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**tiny_config_kwargs(use_skip_connections=False, cell_clip=None)))
    with torch.no_grad():
        for layer in model.bilstm.layers:
            layer.bias.normal_()  # biases are zeros at init; make sure they travel too
    model.save_pretrained(tmp_path / "original")
    assert run_cli(capsys, "--reverse", "--model", tmp_path / "original", "--output", tmp_path / "bilm")[0] == 0
    bilm = tmp_path / "bilm"
    assert run_cli(capsys, "--options", bilm / "options.json", "--weights", bilm / "weights.hdf5", "--output", tmp_path / "back")[0] == 0
    back = ElmoModel.from_pretrained(tmp_path / "back")
    original_state, back_state = model.state_dict(), back.state_dict()
    assert sorted(original_state) == sorted(back_state)
    for name, value in original_state.items():
        assert torch.equal(value, back_state[name]), name
    from hf_elmo.convert.bilm_hdf5 import allennlp_options as architecture

    assert architecture(back.config) == architecture(model.config)
    assert back.config.cell_clip is None and back.config.use_skip_connections is False


# Bad input: clear message, nothing written --------------------------------------------------------


def corrupted_weights(tmp_path, change) -> Path:
    arrays = read_datasets(WEIGHTS)
    change(arrays)
    path = tmp_path / "weights.hdf5"
    write_datasets(path, arrays)
    return path


BAD_WEIGHTS = {
    "missing dataset": (lambda a: a.pop("CNN_proj/b_proj"), r"missing datasets \['CNN_proj/b_proj'\]"),
    "extra dataset": (
        lambda a: a.__setitem__("extra/thing", np.zeros(3, np.float32)),
        r"unexpected datasets \['extra/thing'\]",
    ),
    "wrong shape": (
        lambda a: a.__setitem__("CNN_proj/W_proj", np.zeros((124, 17), np.float32)),
        r"dataset CNN_proj/W_proj has shape \(124, 17\), expected \(124, 16\)",
    ),
    "wrong LSTM shape": (
        lambda a: a.__setitem__("RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0", np.zeros((32, 255), np.float32)),
        r"dataset RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0 has shape \(32, 255\), expected \(32, 256\)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_WEIGHTS))
def test_bad_weights(case, tmp_path, capsys):
    change, message = BAD_WEIGHTS[case]
    weights = corrupted_weights(tmp_path, change)
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", weights, "--output", tmp_path / "out")
    assert code == 2
    assert error.startswith("hf-elmo: error: ") and str(weights) in error
    assert __import__("re").search(message, error), error
    assert entries(tmp_path) == {"weights.hdf5"}


def test_softmax_datasets_of_training_checkpoints_are_ignored(tmp_path, capsys):
    weights = corrupted_weights(tmp_path, lambda a: a.__setitem__("softmax/W", np.zeros((10, 16), np.float32)))
    assert run_cli(capsys, "--options", OPTIONS, "--weights", weights, "--output", tmp_path / "out")[0] == 0


@pytest.mark.parametrize("kind", ["truncated", "cut at the end", "not hdf5", "empty", "a folder"])
def test_unreadable_weights(kind, tmp_path, capsys):
    data = WEIGHTS.read_bytes()
    weights = tmp_path / "weights.hdf5"
    if kind == "truncated":
        weights.write_bytes(data[: len(data) // 2])
    elif kind == "cut at the end":
        weights.write_bytes(data[:-100])
    elif kind == "not hdf5":
        weights.write_bytes(b"\x89HDF but not really" * 50)
    elif kind == "empty":
        weights.write_bytes(b"")
    else:
        weights.mkdir()
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", weights, "--output", tmp_path / "out")
    assert code == 2 and str(weights) in error
    assert ("cannot read" in error) or ("is a folder, not an hdf5 weights file" in error and kind == "a folder"), error
    assert entries(tmp_path) == {"weights.hdf5"}


def test_missing_files_and_arguments(tmp_path, capsys):
    code, error = run_cli(capsys, "--options", tmp_path / "nope.json", "--weights", WEIGHTS, "--output", tmp_path / "o")
    assert code == 2 and "options file not found" in error and "nope.json" in error
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", tmp_path / "nope.hdf5", "--output", tmp_path / "o")
    assert code == 2 and "weights file not found" in error
    code, error = run_cli(capsys, "--options", OPTIONS, "--output", tmp_path / "o")
    assert code == 2 and "--weights" in error
    code, error = run_cli(capsys, "--reverse", "--output", tmp_path / "o")
    assert code == 2 and "--model" in error
    code, error = run_cli(capsys, "--reverse", "--model", tmp_path / "no-model", "--output", tmp_path / "o")
    assert code == 2 and "model folder not found" in error
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", tmp_path, "--output", tmp_path / "o")
    assert code == 2 and "is a folder, not an hdf5 weights file" in error
    code, error = run_cli(capsys, "--reverse", "--model", OPTIONS, "--output", tmp_path / "o")
    assert code == 2 and "is a file, not a model folder" in error
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"lstm": {"dim": 64}}))
    code, error = run_cli(capsys, "--options", options, "--weights", WEIGHTS, "--output", tmp_path / "o")
    assert code == 2 and "missing required section 'char_cnn'" in error
    assert entries(tmp_path) == {"options.json"}


def test_options_that_do_not_match_the_weights(tmp_path, capsys):
    options = json.loads(OPTIONS.read_text())
    options["lstm"]["dim"] = 32
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    code, error = run_cli(capsys, "--options", path, "--weights", WEIGHTS, "--output", tmp_path / "out")
    assert code == 2 and "LSTMCell/W_0 has shape (32, 256), expected (32, 128)" in error


def existing_folder(tmp_path) -> Path:
    """An earlier output (it has a config.json: --overwrite replaces only output folders) with a file of its own."""
    output = tmp_path / "out"
    output.mkdir()
    (output / "config.json").write_text("{}")
    (output / "keep.txt").write_text("precious")
    return output


def assert_untouched(output):
    assert entries(output) == {"config.json", "keep.txt"} and (output / "keep.txt").read_text() == "precious"
    assert entries(output.parent) - {"weights.hdf5"} == {"out"}  # no temporary folders left


def test_existing_output_is_refused_without_overwrite(tmp_path, capsys):
    output = existing_folder(tmp_path)
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", output)
    assert code == 2 and "already exists" in error and "--overwrite" in error
    assert_untouched(output)
    torch.manual_seed(0)
    ElmoModel(ElmoConfig(**tiny_config_kwargs())).save_pretrained(tmp_path / "model")
    code, error = run_cli(capsys, "--reverse", "--model", tmp_path / "model", "--output", output)
    assert code == 2 and "already exists" in error
    assert entries(output) == {"config.json", "keep.txt"}


def test_overwrite_replaces_only_on_success(tmp_path, capsys):
    output = existing_folder(tmp_path)
    weights = corrupted_weights(tmp_path, lambda a: a.pop("char_embed"))
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", weights, "--output", output, "--overwrite")
    assert code == 2 and "char_embed" in error
    assert_untouched(output)
    code, _ = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", output, "--overwrite")
    assert code == 0
    assert "keep.txt" not in entries(output) and "model.safetensors" in entries(output)
    assert entries(tmp_path) == {"out", "weights.hdf5"}
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", a_file, "--overwrite")
    assert code == 2 and "is a file" in error and a_file.read_text() == "mine"


def test_failure_while_writing_leaves_nothing(tmp_path, capsys, monkeypatch):
    def disk_full(self, *args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(ElmoTokenizer, "save_pretrained", disk_full)
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", tmp_path / "new")
    assert code == 2 and "No space left" in error
    assert entries(tmp_path) == set()
    output = existing_folder(tmp_path)
    code, error = run_cli(capsys, "--options", OPTIONS, "--weights", WEIGHTS, "--output", output, "--overwrite")
    assert code == 2
    assert_untouched(output)
