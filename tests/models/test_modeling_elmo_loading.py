"""`from_pretrained` refuses weights that lack tensors of the biLM or hold tensors the model does not have
(`ElmoMissingWeightsError`, naming them) unless `allow_missing_weights=True`; a head's own layers may be missing
(it starts from an encoder), and an encoder ignores a head's."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_elmo import ElmoForCharacterTagging, ElmoForPreTraining, ElmoForSequenceClassification, ElmoForTokenClassification
from hf_elmo import ElmoModel
from hf_elmo.modeling_elmo import ElmoMissingWeightsError
from small_models import tiny_config

LM_VOCAB = ["<S>", "</S>", "<UNK>", "a", "b"]


def encoder(seed=0) -> ElmoModel:
    torch.manual_seed(seed)
    return ElmoModel(tiny_config())


def write_folder(folder, config, state_dict) -> str:
    """A folder another tool might write: config.json and model.safetensors, no weights_checksums.json."""
    config.save_pretrained(folder)
    save_file({name: tensor.contiguous() for name, tensor in state_dict.items()}, folder / "model.safetensors",
              metadata={"format": "pt"})
    return str(folder)


def assert_same_tensors(model, state_dict, prefix=""):
    loaded = model.state_dict()
    for name, tensor in state_dict.items():
        assert torch.equal(loaded[prefix + name], tensor), name


@pytest.mark.parametrize("missing", ["bilstm.layers.1.recurrent_weight", "char_encoder.projection.weight",
                                     "char_encoder.char_embedding.weight"])
def test_weights_lacking_a_biLM_tensor_are_refused_naming_it(missing, tmp_path):
    model = encoder()
    state = {name: tensor for name, tensor in model.state_dict().items() if name != missing}
    folder = write_folder(tmp_path, model.config, state)
    with pytest.raises(ElmoMissingWeightsError, match=f"lacks? 1 of the biLM's tensors \\({missing}\\)"):
        ElmoModel.from_pretrained(folder)
    with pytest.raises(ValueError, match="allow_missing_weights=True"):  # a ValueError, saying what to do
        ElmoForTokenClassification.from_pretrained(folder, num_labels=2)
    loaded = ElmoModel.from_pretrained(folder, allow_missing_weights=True)
    assert_same_tensors(loaded, state)


def test_weights_lacking_a_whole_layer_name_the_first_tensors(tmp_path):
    model = encoder()
    state = {name: tensor for name, tensor in model.state_dict().items() if not name.startswith("bilstm.layers.1.")}
    folder = write_folder(tmp_path, model.config, state)
    with pytest.raises(ElmoMissingWeightsError, match=r"lacks? 4 of the biLM's tensors \(bilstm.layers.1.bias, "):
        ElmoModel.from_pretrained(folder)


def test_foreign_tensors_are_refused_naming_them(tmp_path):
    model = encoder()
    state = {**model.state_dict(), "attention.query.weight": torch.zeros(2, 2)}
    folder = write_folder(tmp_path, model.config, state)
    with pytest.raises(ElmoMissingWeightsError, match=r"holds 1 tensors this model does not have \(attention.query.weight\)"):
        ElmoModel.from_pretrained(folder)
    loaded = ElmoModel.from_pretrained(folder, allow_missing_weights=True)
    assert_same_tensors(loaded, model.state_dict())


def test_a_folder_whose_weights_are_all_there_loads_without_the_checksums_file(tmp_path):
    model = encoder()
    folder = write_folder(tmp_path, model.config, model.state_dict())
    assert_same_tensors(ElmoModel.from_pretrained(folder), model.state_dict())


@pytest.mark.parametrize("head", ["token", "character", "sequence", "pretraining"])
def test_a_head_starts_from_an_encoder_folder(head, tmp_path):
    """The head's own layers are legitimately missing; the biLM's tensors are the encoder's."""
    model = encoder()
    folder = write_folder(tmp_path, model.config, model.state_dict())
    if head == "token":
        loaded = ElmoForTokenClassification.from_pretrained(folder, num_labels=3, task_encoder="bilstm", use_crf=True,
                                                             task_token_features=True)
    elif head == "character":
        loaded = ElmoForCharacterTagging.from_pretrained(folder, num_labels=3, task_token_features=True,
                                                         task_character_features=True)
    elif head == "sequence":
        loaded = ElmoForSequenceClassification.from_pretrained(folder, num_labels=2)
    else:
        loaded = ElmoForPreTraining.from_pretrained(folder, lm_vocab=LM_VOCAB)
    assert_same_tensors(loaded, model.state_dict(), prefix="elmo.")


def test_a_head_folder_lacking_a_biLM_tensor_is_refused(tmp_path):
    torch.manual_seed(0)
    tagger = ElmoForTokenClassification(tiny_config(num_labels=3))
    state = {name: tensor for name, tensor in tagger.state_dict().items() if name != "elmo.bilstm.layers.0.bias"}
    folder = write_folder(tmp_path, tagger.config, state)
    with pytest.raises(ElmoMissingWeightsError, match=r"elmo.bilstm.layers.0.bias"):
        ElmoForTokenClassification.from_pretrained(folder)


@pytest.mark.parametrize("head", ["token", "pretraining"])
def test_an_encoder_loads_from_a_head_folder(head, tmp_path):
    torch.manual_seed(0)
    if head == "token":
        model = ElmoForTokenClassification(tiny_config(num_labels=3, task_encoder="bilstm", use_crf=True,
                                                       task_token_features=True))
    else:
        model = ElmoForPreTraining(tiny_config(lm_vocab=LM_VOCAB))
    model.save_pretrained(tmp_path)
    loaded = ElmoModel.from_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    biLM = {name.removeprefix("elmo."): tensor for name, tensor in saved.items()
            if name.startswith("elmo.") and not name.startswith("elmo.scalar_mixes")}
    assert biLM and len(biLM) >= len([n for n in loaded.state_dict() if not n.startswith("scalar_mixes")])
    assert_same_tensors(loaded, biLM)


def test_save_pretrained_writes_the_weights_with_the_users_umask(tmp_path):
    """Issue 37 #15: safetensors' mkstemp left model.safetensors 0600 while config.json was 0644."""
    import os

    from hf_elmo import ElmoConfig, ElmoModel

    previous = os.umask(0o022)
    try:
        ElmoModel(ElmoConfig(char_embedding_dim=4, char_cnn_filters=[[1, 4]], num_highway_layers=0, projection_dim=4,
                             lstm_cell_dim=8, num_lstm_layers=1)).save_pretrained(tmp_path / "m")
    finally:
        os.umask(previous)
    assert {oct(path.stat().st_mode & 0o777) for path in (tmp_path / "m").iterdir()} == {"0o644"}
