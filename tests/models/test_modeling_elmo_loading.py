"""Loading is transformers' loading: missing, unexpected and mismatched tensors are found by its machinery
(`output_loading_info`, `ignore_mismatched_sizes`, RuntimeError on a size mismatch). On that report, an ordinary
`from_pretrained` refuses weights that lack tensors of the biLM, hold tensors the model does not have or hold values
that are not finite (ValueError naming them); with `output_loading_info=True` the caller inspects instead. A head's
own layers may be missing (it starts from an encoder), and an encoder ignores a head's."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_elmo import ElmoForCharacterTagging, ElmoForPreTraining, ElmoForSequenceClassification, ElmoForTokenClassification
from hf_elmo import ElmoModel
from small_models import SIZE_MISMATCH, tiny_config

LM_VOCAB = ["<S>", "</S>", "<UNK>", "a", "b"]


def encoder(seed=0) -> ElmoModel:
    torch.manual_seed(seed)
    return ElmoModel(tiny_config())


def write_folder(folder, config, state_dict) -> str:
    """A folder another tool might write: config.json and model.safetensors (`safetensors.torch.save_file`)."""
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
    with pytest.raises(ValueError, match=f"lack 1 of the biLM's tensors \\({missing}\\)"):
        ElmoModel.from_pretrained(folder)
    with pytest.raises(ValueError, match="output_loading_info=True"):  # a ValueError, saying what to do
        ElmoForTokenClassification.from_pretrained(folder, num_labels=2)
    loaded, info = ElmoModel.from_pretrained(folder, output_loading_info=True)  # the caller inspects: no refusal
    assert set(info["missing_keys"]) == {missing}  # a list on transformers 4.x
    assert_same_tensors(loaded, state)


def test_weights_lacking_a_whole_layer_name_the_first_tensors(tmp_path):
    model = encoder()
    state = {name: tensor for name, tensor in model.state_dict().items() if not name.startswith("bilstm.layers.1.")}
    folder = write_folder(tmp_path, model.config, state)
    with pytest.raises(ValueError, match=r"lack 4 of the biLM's tensors \(bilstm.layers.1.bias, "):
        ElmoModel.from_pretrained(folder)


def test_foreign_tensors_are_refused_naming_them(tmp_path):
    model = encoder()
    state = {**model.state_dict(), "attention.query.weight": torch.zeros(2, 2)}
    folder = write_folder(tmp_path, model.config, state)
    with pytest.raises(ValueError, match=r"hold 1 tensors this model does not have \(attention.query.weight\)"):
        ElmoModel.from_pretrained(folder)
    loaded, info = ElmoModel.from_pretrained(folder, output_loading_info=True)
    assert set(info["unexpected_keys"]) == {"attention.query.weight"}
    assert_same_tensors(loaded, model.state_dict())


def test_weights_rewritten_by_standard_tools_load(tmp_path):
    """`save_pretrained`, then model.safetensors rewritten with safetensors' own writer (other values): not damaged."""
    model = encoder()
    model.save_pretrained(tmp_path)
    rewritten = {name: tensor + 0.5 for name, tensor in load_file(tmp_path / "model.safetensors").items()}
    save_file(rewritten, tmp_path / "model.safetensors", metadata={"format": "pt"})
    assert_same_tensors(ElmoModel.from_pretrained(tmp_path), rewritten)


@pytest.mark.parametrize("damage", ["nan", "inf", "truncated"])
def test_damaged_weights_are_refused(damage, tmp_path):
    model = encoder()
    model.save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
        with pytest.raises(Exception, match="(?i)safetensor|incomplete|metadata|deserializ"):
            ElmoModel.from_pretrained(tmp_path)
        return
    state = load_file(path)
    state["bilstm.layers.0.bias"][0, 3] = float(damage)
    save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"hold NaN or infinite values \(bilstm.layers.0.bias\)"):
        ElmoModel.from_pretrained(tmp_path)


def test_a_size_mismatch_is_transformers_runtime_error_and_can_be_ignored(tmp_path):
    encoder().save_pretrained(tmp_path)
    with pytest.raises(RuntimeError, match=SIZE_MISMATCH):
        ElmoModel.from_pretrained(tmp_path, lstm_cell_dim=24)
    loaded, info = ElmoModel.from_pretrained(tmp_path, lstm_cell_dim=24, ignore_mismatched_sizes=True,
                                             output_loading_info=True)
    names = {key if isinstance(key, str) else key[0] for key in info["mismatched_keys"]}  # 4.x: names, 5.x: tuples
    assert names >= {"bilstm.layers.0.input_weight"}
    assert loaded.bilstm.layers[0].input_weight.shape[1] == 4 * 24


def test_from_pretrained_without_a_checkpoint_takes_a_state_dict(tmp_path):
    model = encoder()
    loaded = ElmoModel.from_pretrained(None, config=model.config, state_dict=model.state_dict())
    assert_same_tensors(loaded, model.state_dict())
    fresh = ElmoModel.from_pretrained(None, config=model.config, state_dict={})  # every weight from _init_weights
    assert set(fresh.state_dict()) == set(model.state_dict())


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
    with pytest.raises(ValueError, match=r"elmo.bilstm.layers.0.bias"):
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
