"""`ElmoBiLm` (bilm_elmo.py): `ElmoModel`'s modules, weight names and `forward` as a plain `nn.Module` whose import
leaves out transformers' model classes, and `loading.load_bilm`, which the commands load it with to start fast: the
numbers of `ElmoModel.from_pretrained` for the same folder, and the same refusals."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import pytest
import torch
from remote_code_files import CODE_FILES, PACKAGE
from safetensors.torch import load_file, save_file
from small_models import tiny_config

from hf_elmo import (
    ElmoForPreTraining,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoTokenizer,
)
from hf_elmo.loading import ModelNotFoundError, load_model_and_tokenizer, loads_as_bilm
from hf_elmo.models.elmo.bilm_elmo import ElmoBiLm
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR

SENTENCES = [["我", "喜欢", "吃", "小米"], ["小米", "手机", "挺", "好用", "。"], ["ok"]]
LM_VOCAB = ["<S>", "</S>", "<UNK>", "a", "b"]


def save_model(kind: str, folder, **save_options) -> str:
    """A saved encoder, tagger or pretraining run with random weights (every parameter drawn, mixes included)."""
    torch.manual_seed(0)
    if kind == "encoder":
        model = ElmoModel(tiny_config(num_output_representations=2, scalar_mix_layer_norm=True))
    elif kind == "tagger":
        model = ElmoForTokenClassification(tiny_config(num_labels=3, use_crf=True, task_encoder="bilstm"))
    else:
        model = ElmoForPreTraining(tiny_config(lm_vocab=LM_VOCAB))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    model.save_pretrained(folder, **save_options)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(folder)
    return str(folder)


def assert_equal_outputs(got, want):
    for got_part, want_part in zip(got.to_tuple(), want.to_tuple(), strict=True):
        if isinstance(want_part, torch.Tensor):
            assert torch.equal(got_part, want_part)
        else:
            assert all(torch.equal(g, w) for g, w in zip(got_part, want_part, strict=True))


def loading_error(folder, **options) -> tuple[type, str]:
    with pytest.raises((ModelNotFoundError, ValueError)) as caught:
        load_model_and_tokenizer(folder, **options)
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize("kind", ["encoder", "tagger", "pretraining"])
def test_a_saved_folder_loads_as_a_bilm_that_computes_what_elmo_model_computes(kind, tmp_path, caplog):
    folder = save_model(kind, tmp_path)
    assert loads_as_bilm(folder)
    with caplog.at_level(logging.WARNING, logger="hf_elmo.loading"):
        bilm, tokenizer, _ = load_model_and_tokenizer(folder, bilm=True)
        bilm_notes = [record.getMessage() for record in caplog.records]
        caplog.clear()
        model, _, _ = load_model_and_tokenizer(folder)
        model_notes = [record.getMessage() for record in caplog.records]
    assert (type(bilm), type(model), type(tokenizer)) == (ElmoBiLm, ElmoModel, ElmoTokenizer)
    # A tagger's own weights are left out with one line, ElmoModel's (transformers 4.x prints its own report there,
    # which the package does not replace); an encoder and a pretraining run say nothing.
    assert len(bilm_notes) == (kind == "tagger"), bilm_notes
    assert bilm_notes == model_notes or TRANSFORMERS_MAJOR < 5 and not model_notes, (bilm_notes, model_notes)
    assert bilm.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(value, model.state_dict()[name]) for name, value in bilm.state_dict().items())
    assert not bilm.training and bilm._lstm_implementation == model.lstm_implementation == "auto"  # the kernels
    inputs = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        for options in ({}, {"keep_sentence_boundaries": True}, {"return_state": True}):
            assert_equal_outputs(bilm(**inputs, **options), model(**inputs, **options))
        words = inputs["input_ids"][0]
        assert torch.equal(bilm.token_embeddings(words), model.token_embeddings(words))


def test_a_mix_the_weights_lack_starts_as_elmo_models_does(tmp_path):
    """A config.json asking for one more learned mix than the weights hold: ElmoModel starts it at w = 0, gamma = 1
    (a head's layers may be missing); the ElmoBiLm too, not at zeros."""
    folder = save_model("encoder", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_output_representations": 3}))
    bilm, tokenizer, _ = load_model_and_tokenizer(folder, bilm=True)
    model = load_model_and_tokenizer(folder)[0]
    assert bilm.scalar_mixes[2].gamma.item() == 1.0 and not bilm.scalar_mixes[2].scalar_parameters.any()
    inputs = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        assert_equal_outputs(bilm(**inputs), model(**inputs))


def test_weights_saved_in_bfloat16_load_in_float32_as_for_elmo_model(tmp_path):
    torch.manual_seed(0)
    ElmoModel(tiny_config()).to(torch.bfloat16).save_pretrained(tmp_path)
    ElmoTokenizer(segmenter="whitespace").save_pretrained(tmp_path)
    assert {tensor.dtype for tensor in load_file(tmp_path / "model.safetensors").values()} == {torch.bfloat16}
    bilm, tokenizer, _ = load_model_and_tokenizer(str(tmp_path), bilm=True)
    model = load_model_and_tokenizer(str(tmp_path))[0]
    assert bilm.dtype == model.dtype == torch.float32
    inputs = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        assert_equal_outputs(bilm(**inputs), model(**inputs))


def test_what_load_bilm_does_not_take_loads_as_elmo_model(tmp_path):
    """Sharded weights (no model.safetensors) go through transformers' loading, as a Hub name does."""
    folder = save_model("encoder", tmp_path, max_shard_size="20KB")
    assert not (tmp_path / "model.safetensors").exists() and not loads_as_bilm(folder)
    model, tokenizer, _ = load_model_and_tokenizer(folder, bilm=True)
    assert type(model) is ElmoModel
    shutil.rmtree(tmp_path)
    expected = load_model_and_tokenizer(save_model("encoder", tmp_path), bilm=True)[0]
    inputs = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        assert_equal_outputs(model(**inputs), expected(**inputs))


def _drop(state, name):
    del state[name]


def _add_foreign(state, name):
    state["attention.query.weight"] = torch.zeros(2, 2)


def _nan(state, name):
    state[name][0, 3] = float("nan")


DAMAGES = {"missing": _drop, "foreign": _add_foreign, "nan": _nan}


@pytest.mark.parametrize("damage", [*DAMAGES, "truncated", "no weights"])
def test_a_damaged_folder_is_refused_with_elmo_models_words(damage, tmp_path):
    folder = save_model("encoder", tmp_path)
    path = tmp_path / "model.safetensors"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "no weights":
        path.unlink()
    else:
        state = load_file(path)
        DAMAGES[damage](state, "bilstm.layers.0.bias")
        save_file(state, path, metadata={"format": "pt"})
    assert loads_as_bilm(folder) == (damage != "no weights")
    error_class, message = loading_error(folder, bilm=True)
    assert (error_class, message) == loading_error(folder)
    assert message.startswith(f"cannot load model {folder!r}: ") and len(message.splitlines()) == 1, message
    if damage in DAMAGES:
        assert "bilstm.layers.0.bias" in message or "attention.query.weight" in message, message


def test_weights_of_other_shapes_than_the_config_are_refused_naming_them(tmp_path):
    folder = save_model("encoder", tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    state["char_encoder.projection.bias"] = torch.zeros(5)
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    error_class, message = loading_error(folder, bilm=True)
    assert error_class is ModelNotFoundError
    assert "char_encoder.projection.bias: (5,) in the checkpoint, (8,) in the model" in message, message


def test_the_bilm_file_imports_none_of_transformers_model_classes(tmp_path):
    """Imported as remote code is (the five files in a package of their own, hf-elmo out of the way), bilm_elmo.py
    leaves out transformers.modeling_utils, which modeling_elmo.py imports (the check can fail)."""
    package = tmp_path / "elmo_remote"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in CODE_FILES:
        shutil.copy(PACKAGE / name, package / name)
    script = ("import sys\n"
              "import elmo_remote.bilm_elmo\n"
              "print('transformers.modeling_utils' in sys.modules)\n"
              "import elmo_remote.modeling_elmo\n"
              "print('transformers.modeling_utils' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "True"]


def test_an_elmo_bilm_is_refused_a_config_before_any_module_is_built():
    with pytest.raises(ValueError, match="Invalid ElmoConfig"):
        ElmoBiLm(tiny_config(lstm_cell_dim=-1))
