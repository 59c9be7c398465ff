"""The ONNX export (hf_elmo.convert.onnx): onnxruntime's layers against the PyTorch ElmoModel's reference path.

Every comparison uses the derived float32 tolerance of tests/utils/numerics.py on random batches (1-64 sentences,
1-100 words, random lengths, so padding falls in every position), on tiny models of every architecture the
converters accept, on a converted 3-layer AllenNLP-style model with cell and projection clipping, on the
ELMoForManyLangs fixture (word embedding) and on the shipped model. The graph is written from the weights
without example inputs, so no sentence length is special; a 150-word sentence checks it anyway.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import hf_elmo  # noqa: E402
from hf_elmo import ElmoConfig, ElmoModel, ElmoTokenizer  # noqa: E402
from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm, write_bilm_files  # noqa: E402
from hf_elmo.cli import main as cli_main  # noqa: E402
from hf_elmo.convert.onnx import export_onnx  # noqa: E402
from hf_elmo.convert.onnx.graph import _lstm_step, elmo_onnx_model  # noqa: E402
from hf_elmo.models.elmo.bilm_elmo import reference_lstm_step  # noqa: E402
from numerics import bilm_tolerance  # noqa: E402
from paths import FIXTURES, REPO_ROOT  # noqa: E402

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


def use_reference_lstm(model: ElmoModel) -> ElmoModel:
    """The package's reference recurrence, whichever way this version of the model selects it."""
    if hasattr(model, "set_lstm_implementation"):
        model.set_lstm_implementation("reference")
    else:
        model.config.lstm_implementation = "reference"
    return model.eval()


def session(proto_or_path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    source = proto_or_path.SerializeToString() if hasattr(proto_or_path, "SerializeToString") else str(proto_or_path)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def random_model(seed: int = 0, lstm_scale: float = 0.45, **overrides) -> ElmoModel:
    """A tiny random model; LSTM weights large enough that the clips (when set) are often active, and small
    enough that the recurrence does not amplify float32 rounding from step to step: at 0.6 on three layers the
    package's own fast path left the per-step tolerance of numerics.py 13-fold on long sentences (the
    export 6-fold); at 0.45 both stay under a tenth of it. The scale shrinks with the cell size for the same
    reason."""
    torch.manual_seed(seed)
    settings = dict(char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8], [3, 8]], num_highway_layers=1,
                    projection_dim=8, lstm_cell_dim=16, num_lstm_layers=2, cell_clip=0.5, proj_clip=0.3)
    model = ElmoModel(ElmoConfig(**{**settings, **overrides}))
    with torch.no_grad():
        for layer in model.bilstm.layers:
            for parameter in layer.parameters():
                parameter.normal_(0.0, lstm_scale * (16 / model.config.lstm_cell_dim) ** 0.5)
    return use_reference_lstm(model)


def random_batch(rng, config, batch: int, words: int, long_row: int | None = None):
    """Character ids (and word ids) of `batch` sentences of random lengths 0..words; padding after each."""
    lengths = rng.integers(0, words + 1, size=batch)
    if long_row is not None:
        lengths[long_row % batch] = words
    ids = np.zeros((batch, words, config.max_characters_per_token), dtype=np.int64)
    mask = (np.arange(words)[None, :] < lengths[:, None]).astype(np.int64)
    real = mask.astype(bool)
    words_ids = rng.integers(1, config.char_vocab_size, size=(int(real.sum()), config.max_characters_per_token))
    # Like a tokenizer's rows: each word's ids end in a run of one padding id (some fill the whole width).
    word_ends = rng.integers(1, config.max_characters_per_token + 1, size=(len(words_ids), 1))
    padding_id = rng.integers(1, config.char_vocab_size)
    ids[real] = np.where(np.arange(config.max_characters_per_token) < word_ends, words_ids, padding_id)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if config.word_vocab_size:
        feeds["word_ids"] = np.where(mask.astype(bool), rng.integers(0, config.word_vocab_size, size=mask.shape), 0)
    return feeds


def reference_layers(model: ElmoModel, feeds) -> np.ndarray:
    kwargs = {name: torch.from_numpy(value) for name, value in feeds.items()}
    with torch.no_grad():
        return torch.stack(model(**kwargs).hidden_states).numpy()


def assert_matches_model(model, onnx_session, feeds):
    got = onnx_session.run(["layers"], feeds)[0]
    expected = reference_layers(model, feeds)
    assert got.shape == expected.shape
    assert got.dtype == np.float32
    assert np.isfinite(got).all()
    padding = ~feeds["attention_mask"].astype(bool)
    assert not got[:, padding].any(), "padding positions must be exactly zero"
    if expected.size:
        difference = float(np.abs(got - expected).max())
        tolerance = bilm_tolerance(model.config, expected)
        assert difference <= tolerance, f"max difference {difference:.3g} over the derived tolerance {tolerance:.3g}"
    return got


ARCHITECTURES = {
    "default": {},
    "no_clips": dict(cell_clip=None, proj_clip=None),
    "cell_clip_only": dict(proj_clip=None),
    "proj_clip_only": dict(cell_clip=None),
    "no_skip_connections": dict(use_skip_connections=False),
    "one_layer": dict(num_lstm_layers=1),
    "four_layers": dict(num_lstm_layers=4),
    "no_highway_tanh": dict(num_highway_layers=0, char_cnn_activation="tanh"),
    "three_highways": dict(num_highway_layers=3),
    "short_words_one_filter": dict(max_characters_per_token=7, char_cnn_filters=[[3, 6]]),
    "forget_bias_0": dict(lstm_forget_bias=0.0),
    "forget_bias_odd": dict(lstm_forget_bias=0.37),
    "wide_cell": dict(lstm_cell_dim=40, projection_dim=6),
    "dictionary_scheme": dict(char_scheme="dictionary", char_vocab_size=30, max_characters_per_token=9,
                              bos_char_ids=[6, 1, 5] + [4] * 6, eos_char_ids=[6, 2, 5] + [4] * 6),
}


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_architecture_matches_pytorch(name):
    model = random_model(**ARCHITECTURES[name])
    onnx_session = session(elmo_onnx_model(model.config, model.state_dict()))
    rng = np.random.default_rng(len(name))
    for batch, words in [(1, 1), (int(rng.integers(1, 65)), int(rng.integers(1, 101))), (5, 12)]:
        assert_matches_model(model, onnx_session, random_batch(rng, model.config, batch, words))


@pytest.fixture(scope="module")
def converted_allennlp_model(tmp_path_factory):
    """A 3-layer model with cell and projection clipping, written as bilm-tf files and converted back."""
    source = random_model(seed=3, num_lstm_layers=3, cell_clip=0.5, proj_clip=0.3, num_highway_layers=2,
                          char_cnn_filters=[[1, 4], [2, 8], [3, 16]])
    files = write_bilm_files(source, tmp_path_factory.mktemp("bilm") / "model")
    return use_reference_lstm(load_model_from_bilm(files / "options.json", files / "weights.hdf5"))


@pytest.fixture(scope="module")
def converted_allennlp_export(converted_allennlp_model, tmp_path_factory):
    tokenizer = ElmoTokenizer(max_characters_per_token=converted_allennlp_model.config.max_characters_per_token)
    return export_onnx(converted_allennlp_model, tmp_path_factory.mktemp("onnx") / "export", tokenizer=tokenizer)


def test_converted_three_layer_model_on_twenty_random_batches(converted_allennlp_model, converted_allennlp_export):
    model = converted_allennlp_model
    assert model.config.num_lstm_layers == 3 and model.config.cell_clip and model.config.proj_clip
    onnx_session = session(converted_allennlp_export / "model.onnx")
    rng = np.random.default_rng(20)
    for index in range(20):
        batch, words = int(rng.integers(1, 65)), int(rng.integers(1, 101))
        if index == 7:
            words = 150  # longer than any other input of the suite
        assert_matches_model(model, onnx_session, random_batch(rng, model.config, batch, words, long_row=index))


def test_the_clips_are_active_in_the_converted_model(converted_allennlp_model):
    """Without clipping the outputs must leave the tolerance, or the clip test above proves nothing."""
    model = converted_allennlp_model
    unclipped = ElmoConfig(**{**model.config.to_dict(), "cell_clip": None, "proj_clip": None})
    feeds = random_batch(np.random.default_rng(1), model.config, 8, 20, long_row=0)
    got = session(elmo_onnx_model(unclipped, model.state_dict())).run(["layers"], feeds)[0]
    expected = reference_layers(model, feeds)
    assert np.abs(got - expected).max() > 100 * bilm_tolerance(model.config, expected)


@pytest.mark.parametrize("field, value", [("lstm_forget_bias", 0.0), ("use_skip_connections", False)])
def test_a_wrong_setting_is_caught_by_the_tolerance(field, value):
    model = random_model(seed=5, num_lstm_layers=3)
    wrong = ElmoConfig(**{**model.config.to_dict(), field: value})
    feeds = random_batch(np.random.default_rng(2), model.config, 6, 15, long_row=0)
    got = session(elmo_onnx_model(wrong, model.state_dict())).run(["layers"], feeds)[0]
    expected = reference_layers(model, feeds)
    assert np.abs(got - expected).max() > 100 * bilm_tolerance(model.config, expected)


def test_empty_sentences_give_zeros():
    model = random_model(seed=7)
    onnx_session = session(elmo_onnx_model(model.config, model.state_dict()))
    width = model.config.max_characters_per_token
    for batch, words in [(3, 0), (1, 0)]:  # every sentence of the batch empty
        feeds = {"input_ids": np.zeros((batch, words, width), np.int64),
                 "attention_mask": np.zeros((batch, words), np.int64)}
        got = assert_matches_model(model, onnx_session, feeds)
        assert got.shape == (3, batch, 0, 16)
    feeds = random_batch(np.random.default_rng(3), model.config, 4, 6, long_row=0)
    feeds["input_ids"][2] = 0
    feeds["attention_mask"][2] = 0  # one empty sentence among others
    got = assert_matches_model(model, onnx_session, feeds)
    assert not got[:, 2].any()


def test_word_embedding_model_takes_word_ids(tmp_path):
    """ELMoForManyLangs models (word embedding + dictionary characters, forget bias 0) get a `word_ids` input."""
    from hf_elmo.convert.elmoformanylangs import load_model_from_elmoformanylangs

    model, tokenizer = load_model_from_elmoformanylangs(FIXTURES / "elmoformanylangs" / "model", segmenter="whitespace")
    use_reference_lstm(model)
    assert model.config.word_vocab_size
    folder = export_onnx(model, tmp_path / "export", tokenizer=tokenizer)
    onnx_session = session(folder / "model.onnx")
    assert [i.name for i in onnx_session.get_inputs()] == ["input_ids", "attention_mask", "word_ids"]
    assert "word_ids" in (folder / "README.md").read_text(encoding="utf-8")
    rng = np.random.default_rng(4)
    for batch, words in [(int(rng.integers(1, 65)), int(rng.integers(1, 101))), (3, 9)]:
        assert_matches_model(model, onnx_session, random_batch(rng, model.config, batch, words, long_row=0))
    sentences = json.loads((FIXTURES / "elmoformanylangs" / "sentences.json").read_text(encoding="utf-8"))[:4]
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
    feeds = {name: np.asarray(encoded[name], dtype=np.int64) for name in ("input_ids", "attention_mask", "word_ids")}
    assert_matches_model(model, onnx_session, feeds)


@pytest.fixture(scope="module")
def shipped_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shipped") / "elmo-onnx"
    assert cli_main(["export", "--model", hf_elmo.DEFAULT_MODEL, "--format", "onnx", "--output", str(folder)]) == 0
    return folder


def test_shipped_model_through_the_command_line(shipped_export):
    model = use_reference_lstm(ElmoModel.from_pretrained(hf_elmo.DEFAULT_MODEL))
    tokenizer = ElmoTokenizer.from_pretrained(shipped_export)  # the tokenizer files written beside the graph
    written = {p.name for p in shipped_export.iterdir()}
    assert {"README.md", "char_vocab.json", "model.onnx", "tokenizer_config.json"} <= written
    onnx_session = session(shipped_export / "model.onnx")
    texts = ["我们喝小米粥。", "", "小米发布了新手机，价格很便宜", "ELMo 在 2018 年提出"]
    encoded = tokenizer(texts, padding=True, return_tensors="np")
    feeds = {name: np.asarray(encoded[name], dtype=np.int64) for name in ("input_ids", "attention_mask")}
    assert_matches_model(model, onnx_session, feeds)
    rng = np.random.default_rng(6)
    assert_matches_model(model, onnx_session, random_batch(rng, model.config, 32, 40, long_row=0))


def test_command_refuses_an_existing_folder(shipped_export, capsys):
    before = sorted(p.name for p in shipped_export.iterdir())
    code = cli_main(["export", "--model", hf_elmo.DEFAULT_MODEL, "--format", "onnx", "--output", str(shipped_export)])
    assert code == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted(p.name for p in shipped_export.iterdir()) == before


def test_a_tokenizer_that_does_not_fit_is_refused_and_nothing_is_written(tmp_path):
    model = random_model()
    with pytest.raises(ValueError, match="does not fit the model.*20 ids per word, the model reads 50"):
        export_onnx(model, tmp_path / "export", tokenizer=ElmoTokenizer(max_characters_per_token=20))
    assert list(tmp_path.iterdir()) == []


def test_a_model_without_its_tokenizer_is_refused(tmp_path):
    with pytest.raises(ValueError, match="pass its tokenizer"):
        export_onnx(random_model(), tmp_path / "export")
    assert list(tmp_path.iterdir()) == []


def test_a_model_with_a_token_cache_and_a_task_model(tmp_path):
    """A model with a token cache (in memory, never a weight) exports the same graph; a task model's export gives
    its biLM's layers (beside its own outputs, tests/export/test_task_export.py)."""
    from hf_elmo import ElmoForTokenClassification
    from hf_elmo.kernels import build_token_cache

    tokenizer = ElmoTokenizer(segmenter="whitespace")
    cached = random_model(seed=8)
    cached.set_lstm_implementation("auto")  # the token cache lives in the kernels
    build_token_cache(cached, torch.tensor([tokenizer.word_to_char_ids(word) for word in ["the", "cat", "sat"]]))
    feeds = {name: np.asarray(value, dtype=np.int64) for name, value in tokenizer(
        [["the", "cat", "sat", "down"], ["cat"]], is_split_into_words=True, padding=True, return_tensors="np").items()}
    folder = export_onnx(cached, tmp_path / "cached", tokenizer=tokenizer)
    assert_matches_model(cached, session(folder / "model.onnx"), feeds)

    torch.manual_seed(9)
    tagger_config = ElmoConfig(**{**cached.config.to_dict(), "num_labels": 3})
    tagger = ElmoForTokenClassification(tagger_config)
    folder = export_onnx(tagger, tmp_path / "tagger", tokenizer=tokenizer)
    assert_matches_model(use_reference_lstm(tagger.elmo), session(folder / "model.onnx"), feeds)


def test_command_without_onnx_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    code = cli_main(["export", "--format", "onnx", "--output", str(tmp_path / "export")])
    assert code == 2
    assert 'pip install -e ".[export]"' in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_benchmark_runs_on_a_tiny_model(capsys):
    """benchmarks/bench_onnx.py --tiny: a smoke test (the figures of a tiny model mean nothing)."""
    spec = importlib.util.spec_from_file_location("bench_onnx", REPO_ROOT / "benchmarks" / "bench_onnx.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--tiny", "--repeats", "1", "--threads", "1"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| 1 x 20", "| 32 x 20"))]
    assert len(table) == 2


def test_a_failure_while_writing_leaves_no_folder(tmp_path, monkeypatch):
    tokenizer = ElmoTokenizer()

    def fail(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(tokenizer, "save_pretrained", fail)
    with pytest.raises(OSError, match="no space left"):
        export_onnx(random_model(), tmp_path / "export", tokenizer=tokenizer)
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary (with model.onnx in it)


def test_weights_that_do_not_fit_the_config_are_named():
    model = random_model()
    state = dict(model.state_dict())
    state["bilstm.layers.1.bias"] = state["bilstm.layers.1.bias"][:, :-1]
    with pytest.raises(ValueError, match=r"layers.1.bias has shape \(2, 63\), but the config describes \(2, 64\)"):
        elmo_onnx_model(model.config, state)
    del state["char_encoder.projection.weight"]
    with pytest.raises(ValueError, match="no 'char_encoder.projection.weight'"):
        elmo_onnx_model(model.config, state)


def test_command_refuses_a_missing_parent_folder(tmp_path, capsys):
    code = cli_main(["export", "--format", "onnx", "--output", str(tmp_path / "missing" / "export")])
    assert code == 2
    assert f"output folder does not exist: {tmp_path / 'missing'}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_character_id_outside_the_vocabulary_is_an_error():
    model = random_model()
    feeds = random_batch(np.random.default_rng(0), model.config, 2, 3, long_row=0)
    feeds["input_ids"][0, 0, 0] = model.config.char_vocab_size
    with pytest.raises(Exception, match="out of data bounds"):
        session(elmo_onnx_model(model.config, model.state_dict())).run(["layers"], feeds)


def test_the_graphs_step_takes_the_reference_steps_arguments():
    """Issue 42: the ONNX step is written against `reference_lstm_step` (same arguments, same order, after the graph
    it adds its nodes to), so a change to the arithmetic starts there."""
    assert list(inspect.signature(_lstm_step).parameters) == ["g", *inspect.signature(reference_lstm_step).parameters]
