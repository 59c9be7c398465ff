"""ElmoModel on small random models: outputs, mixing, batch independence, state, dtypes, bad input."""

import inspect

import pytest
import torch

import hf_elmo.models.elmo.modeling_elmo as modeling_elmo
from hf_elmo import ElmoModel, ElmoTokenizer
from hf_elmo.utils.transformers_versions import TRANSFORMERS_MAJOR
from modeling_helpers import SENTENCES, encode, make_model, run
from small_models import SIZE_MISMATCH, tiny_config
from transformers import AutoModel

pytestmark = pytest.mark.numerics  # also run under forced AVX2 kernels by .ci/run


# Outputs ---------------------------------------------------------------------------------------


def test_output_fields_and_shapes(model):
    output = run(model, SENTENCES)
    batch, words, width = 4, 9, 2 * model.config.projection_dim
    assert len(output.hidden_states) == model.config.num_lstm_layers + 1
    for layer in output.hidden_states:
        assert layer.shape == (batch, words, width)
    assert output.last_hidden_state is output.hidden_states[-1]
    assert len(output.elmo_representations) == 2
    assert all(mix.shape == (batch, words, width) for mix in output.elmo_representations)
    assert output.mask.dtype == torch.float32  # no bool tensor among the outputs: arithmetic works on each
    assert output.mask.sum(dim=1).tolist() == [9, 2, 5, 1]
    assert output.final_state is None
    # Layer 0 is the token vector twice; padding positions are zero in every layer.
    token, again = output.hidden_states[0].chunk(2, dim=-1)
    assert torch.equal(token, again)
    for layer in output.hidden_states:
        assert not layer[output.mask == 0].any()


def test_outputs_hold_no_bool_tensor(model):
    """Code that does arithmetic on every output tensor (transformers' equivalence tests, user code) works."""
    output = run(model, SENTENCES[:2], return_state=True, keep_sentence_boundaries=True)
    tensors = [value for value in output.values() if torch.is_tensor(value)]
    tensors += [t for value in output.values() if isinstance(value, tuple) for t in value]
    assert tensors and all(t.is_floating_point() for t in tensors)


@pytest.mark.parametrize("implementation", ["reference", "auto"])
def test_every_returned_layer_receives_gradients(implementation):
    """The returned layers are the tensors the model went on to compute with: layer 0 feeds the biLSTM (so the top
    layer's gradient reaches it) and the mixes are made of every returned layer."""
    model = make_model(seed=3)
    model.set_lstm_implementation(implementation)
    for reached_from in ("last_hidden_state", "mixes"):  # one backward per forward (the kernels' own backward)
        output = model(**encode(SENTENCES[:3]))
        for layer in output.hidden_states:
            layer.retain_grad()
        getattr(output, reached_from).sum().backward()
        layers = output.hidden_states if reached_from == "mixes" else output.hidden_states[:1]
        assert all(layer.grad is not None and layer.grad.abs().sum() > 0 for layer in layers), reached_from


def test_tuple_output(model):
    with torch.no_grad():  # as `run` (inference may take another kernel than autograd: not bit-identical)
        as_tuple = model(**encode(SENTENCES[:2]), return_dict=False)
    assert isinstance(as_tuple, tuple)
    assert torch.equal(as_tuple[0], run(model, SENTENCES[:2]).last_hidden_state)


def test_layer_0_equals_token_embeddings(model):
    output = run(model, SENTENCES[:1])
    words = torch.tensor([ElmoTokenizer().word_to_char_ids(w) for w in SENTENCES[0]])
    with torch.no_grad():
        vectors = model.token_embeddings(words)
        assert torch.allclose(output.hidden_states[0][0, :, :8], vectors, atol=1e-6, rtol=0)
        assert model.token_embeddings(words.view(3, 3, 50)).shape == (3, 3, 8)
    with pytest.raises(ValueError, match="50"):
        model.token_embeddings(words[:, :10])
    with pytest.raises(ValueError, match="outside"):  # values are checked on request
        model.validate_inputs((words + 1000).unsqueeze(0))


def test_hidden_states_on_request_and_no_attentions(model):
    inputs = encode(SENTENCES[:2])
    with torch.no_grad():
        everything = model(**inputs)
        top_only = model(**inputs, output_hidden_states=False)
    assert top_only.hidden_states is None
    assert torch.equal(top_only.last_hidden_state, everything.last_hidden_state)
    assert all(torch.equal(a, b) for a, b in zip(top_only.elmo_representations, everything.elmo_representations))
    with pytest.raises(ValueError, match="no attention layers: output_attentions=True cannot be honoured"):
        model(**inputs, output_attentions=True)


@pytest.mark.parametrize("feature_layer", [0, -2, "average", "mix"])
def test_last_hidden_state_is_the_configured_feature_layer(feature_layer):
    model = ElmoModel(tiny_config(feature_layer=feature_layer)).eval()
    outputs = run(model, SENTENCES)
    layers = torch.stack(outputs.hidden_states)
    expected = {0: layers[0], -2: layers[-2], "average": layers.mean(dim=0), "mix": outputs.mixes[:, 0]}[feature_layer]
    assert torch.equal(outputs.last_hidden_state, expected)


def test_sentence_boundaries_kept_on_request(model):
    plain = run(model, SENTENCES)
    kept = run(model, SENTENCES, keep_sentence_boundaries=True)
    assert kept.last_hidden_state.shape[1] == plain.last_hidden_state.shape[1] + 2
    assert kept.mask.sum(dim=1).tolist() == [11, 4, 7, 3]
    for inner, outer in zip(plain.hidden_states, kept.hidden_states):
        assert torch.equal(inner, outer[:, 1:-1] * plain.mask.unsqueeze(-1))
    # Row 1 ("hello world"): </S> sits at position 3, after it only zeros.
    assert kept.last_hidden_state[1, 3].any() and not kept.last_hidden_state[1, 4:].any()


@pytest.mark.parametrize("count", [0, 1, 3])
def test_number_of_mixes_is_configurable(count):
    model = make_model(num_output_representations=count)
    assert len(model.scalar_mixes) == count
    assert len(run(model, SENTENCES[:2]).elmo_representations) == count


# Independence and state ------------------------------------------------------------------------


def test_batch_independence(model):
    """A sentence alone, and among longer and shorter ones at any row, gives the same vectors."""
    target = SENTENCES[2]
    alone = run(model, [target])
    contexts = [
        [SENTENCES[0], target, SENTENCES[1]],  # longer before, shorter after
        [target, SENTENCES[3], SENTENCES[3]],  # only shorter ones
        [SENTENCES[1], SENTENCES[0], SENTENCES[0], target],  # only longer ones, last row
    ]
    for batch in contexts:
        row = batch.index(target)
        output = run(model, batch)
        length = len(target)
        for a, b in zip(alone.hidden_states, output.hidden_states):
            assert (a[0, :length] - b[row, :length]).abs().max() <= 1e-6
        for a, b in zip(alone.elmo_representations, output.elmo_representations):
            assert (a[0, :length] - b[row, :length]).abs().max() <= 1e-6


def test_stateless_across_calls(model):
    first = run(model, SENTENCES)
    run(model, [SENTENCES[0]] * 4)  # anything in between
    second = run(model, SENTENCES)
    for a, b in zip(first.hidden_states, second.hidden_states):
        assert torch.equal(a, b)


def test_explicit_state(model):
    config = model.config
    output = run(model, SENTENCES, return_state=True)
    h, c = output.final_state
    assert h.shape == (config.num_lstm_layers, 2, 4, config.projection_dim)
    assert c.shape == (config.num_lstm_layers, 2, 4, config.lstm_cell_dim)
    # Rows keep the caller's order even though the LSTM runs them sorted by length.
    swapped = run(model, SENTENCES[::-1], return_state=True)
    for ours, theirs in zip(output.final_state, swapped.final_state):
        assert torch.allclose(ours, theirs.flip(2), atol=1e-6, rtol=0)
    # A zero state is the default; a non-zero state changes the outputs.
    zeros = (torch.zeros_like(h), torch.zeros_like(c))
    assert torch.equal(run(model, SENTENCES, initial_state=zeros).last_hidden_state, output.last_hidden_state)
    carried = run(model, SENTENCES, initial_state=(h, c))
    assert (carried.last_hidden_state - output.last_hidden_state).abs().max() > 1e-3
    # The input state is not modified in place.
    assert torch.equal(h, output.final_state[0])


@pytest.mark.parametrize("skip", [True, False])
def test_skip_connections(skip):
    with_skip = make_model(use_skip_connections=True)
    without = make_model(use_skip_connections=False)
    without.load_state_dict(with_skip.state_dict())
    a, b = run(with_skip, SENTENCES), run(without, SENTENCES)
    # Layer 1 has no residual; layer 2 of the residual model adds its input (layer 1) to the LSTM output.
    assert torch.equal(a.hidden_states[1], b.hidden_states[1])
    assert torch.allclose(a.hidden_states[2], b.hidden_states[2] + a.hidden_states[1], atol=1e-6, rtol=0)
    assert (a.hidden_states[2] - b.hidden_states[2]).abs().max() > 1e-2
    chosen = a if skip else b
    assert torch.isfinite(chosen.last_hidden_state).all()


# Save / load, dtypes, devices ------------------------------------------------------------------


def test_save_and_load_exact(model, tmp_path):
    model.save_pretrained(tmp_path)
    expected = run(model, SENTENCES)
    for loaded in (ElmoModel.from_pretrained(tmp_path), AutoModel.from_pretrained(tmp_path)):
        assert isinstance(loaded, ElmoModel)
        got = run(loaded.eval(), SENTENCES)
        for a, b in zip(expected.hidden_states + expected.elmo_representations, got.hidden_states + got.elmo_representations):
            assert torch.equal(a, b)


def test_float64_and_bfloat16(model, tmp_path):
    reference = run(model, SENTENCES)
    double = make_model(num_output_representations=2).double()
    out64 = run(double, SENTENCES, return_state=True)
    assert out64.last_hidden_state.dtype == torch.float64 and out64.final_state[1].dtype == torch.float64
    assert (out64.last_hidden_state - reference.last_hidden_state.double()).abs().max() <= 1e-5
    model.save_pretrained(tmp_path)
    half = ElmoModel.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    out16 = run(half, SENTENCES)
    assert out16.last_hidden_state.dtype == torch.bfloat16
    assert all(mix.dtype == torch.bfloat16 for mix in out16.elmo_representations)
    error = (out16.last_hidden_state.float() - reference.last_hidden_state).abs().max()
    assert error <= 0.05 * reference.last_hidden_state.abs().max()
    # A float32 state is accepted by a float64 model (cast to the model's dtype).
    h, c = run(model, SENTENCES, return_state=True).final_state
    assert run(double, SENTENCES, initial_state=(h, c)).last_hidden_state.dtype == torch.float64


def test_no_cpu_only_code():
    """No hard-coded device in the modelling files: every tensor they create follows its inputs or weights (host
    values a torch API wants, such as pack_padded_sequence's lengths, are read with `.tolist()`)."""
    import hf_elmo.models.elmo.bilm_elmo as bilm_elmo

    for module in (bilm_elmo, modeling_elmo):
        source = inspect.getsource(module)
        for pattern in ('"cpu"', "'cpu'", ".cpu()", ".numpy()", "cuda"):
            assert pattern not in source, (module.__name__, pattern)


def test_integer_dtypes_accepted(model):
    inputs = encode(SENTENCES)
    with torch.no_grad():
        as_int32 = model(inputs["input_ids"].int(), attention_mask=inputs["attention_mask"].bool())
    assert torch.equal(as_int32.last_hidden_state, run(model, SENTENCES).last_hidden_state)
    with torch.no_grad():  # character ids fit in a byte (the byte scheme's ids are < 262, most < 256)
        small = inputs["input_ids"].clamp(max=255)
        as_uint8 = model(small.to(torch.uint8), attention_mask=inputs["attention_mask"])
        expected = model(small, attention_mask=inputs["attention_mask"])
    assert torch.equal(as_uint8.last_hidden_state, expected.last_hidden_state)


# Bad input ---------------------------------------------------------------------------------------


def test_forward_refuses_inputs_of_the_wrong_shape_or_type(model):
    inputs = encode(SENTENCES[:2])
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    cases = [
        (ValueError, "shape", dict(input_ids=ids[0])),  # rank 2
        (ValueError, "shape", dict(input_ids=ids.unsqueeze(0))),  # rank 4
        (ValueError, r"\(batch, words, 50\)", dict(input_ids=ids[..., :10])),
        (TypeError, "integer", dict(input_ids=ids.float())),
        (TypeError, "integer", dict(input_ids=ids > 0)),
        (TypeError, "torch.Tensor", dict(input_ids=ids.tolist())),
        (ValueError, "empty batch", dict(input_ids=ids[:0])),
        (ValueError, "attention_mask must have shape", dict(input_ids=ids, attention_mask=mask[:, :1])),
        (ValueError, "no word embedding: word_ids must be None", dict(input_ids=ids, word_ids=mask)),
        (ValueError, "pair", dict(input_ids=ids, initial_state=torch.zeros(3))),
        (
            ValueError,
            r"initial_state shapes must be h \(2, 2, 2, 8\)",
            dict(input_ids=ids, initial_state=(torch.zeros(2, 2, 3, 8), torch.zeros(2, 2, 3, 16))),
        ),
        (
            ValueError,
            "initial_state shapes",
            dict(input_ids=ids, initial_state=(torch.zeros(2, 2, 2, 8), torch.zeros(2, 2, 2, model.config.projection_dim))),
        ),
        (TypeError, "h must be a floating-point torch.Tensor, got ndarray",
         dict(input_ids=ids, initial_state=(torch.zeros(2, 2, 2, 8).numpy(), torch.zeros(2, 2, 2, 16)))),
        (TypeError, "c must be a floating-point torch.Tensor, got torch.int64",
         dict(input_ids=ids, initial_state=(torch.zeros(2, 2, 2, 8), torch.zeros(2, 2, 2, 16, dtype=torch.long)))),
    ]
    for error, message, kwargs in cases:
        with pytest.raises(error, match=message):
            model(**kwargs)


def test_validate_inputs_refuses_values_forward_does_not_read(model):
    """forward() checks shapes only (reading values would synchronise with an accelerator); validate_inputs
    checks the values on request, naming the first problem."""
    inputs = encode(SENTENCES[:2])
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    model.validate_inputs(ids, mask)  # the tokenizer's outputs pass
    model.validate_inputs(ids)
    cases = [
        ("261", dict(input_ids=ids + 300)),
        (r"character id -1, outside \[0, 261\]", dict(input_ids=torch.where(ids > 0, ids, -1))),
        ("ones then zeros", dict(input_ids=ids, attention_mask=mask.flip(1))),
        ("padded .* as a real word", dict(input_ids=ids, attention_mask=torch.ones_like(mask))),
        ("only 0 .* and 1", dict(input_ids=ids, attention_mask=mask * 0.5)),
        ("only 0 .* and 1", dict(input_ids=ids, attention_mask=mask * 2)),
    ]
    words_after_padding = ids.clone()
    words_after_padding[1, 0] = 0  # row 1 ("hello world"): padding, then a word
    cases.append(("ones then zeros", dict(input_ids=words_after_padding)))
    cases.append(("attention_mask must have shape", dict(input_ids=ids, attention_mask=mask[:, :1])))
    for message, kwargs in cases:
        with pytest.raises(ValueError, match=message):
            model.validate_inputs(**kwargs)
    with torch.no_grad():  # forward itself does not look: the mask says which positions are words
        model(ids, attention_mask=mask.flip(1))


def test_validate_inputs_checks_the_word_ids_of_a_word_embedding():
    model = make_model(word_vocab_size=6, word_embedding_dim=3, bos_word_id=0, eos_word_id=1)
    inputs = encode(SENTENCES[:2])
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    word_ids = torch.full(mask.shape, 2) * mask
    model.validate_inputs(ids, mask, word_ids)
    with pytest.raises(ValueError, match=r"word_ids contains word id 6, outside \[0, 5\]"):
        model.validate_inputs(ids, mask, word_ids.masked_fill(mask.bool(), 6))
    with pytest.raises(ValueError, match="this model has a word embedding: pass `?word_ids"):
        model.validate_inputs(ids, mask)
    with pytest.raises(ValueError, match="this model has a word embedding: pass `word_ids`"):
        model(ids, attention_mask=mask)
    word_ids[1, -1] = 99  # at padding: never read
    model.validate_inputs(ids, mask, word_ids)


@pytest.mark.parametrize("kind", ["encoder", "tagger"])
def test_forward_reads_no_tensor_values(kind):
    """No host synchronisation in the default forward (issue 34): on the meta device every read of a value
    (`bool(t)`, `int(t)`, `t.tolist()`, `torch.equal`) raises, so a forward that completes there reads none."""
    from hf_elmo import ElmoForTokenClassification
    from small_models import tiny_config

    inputs = encode(SENTENCES)
    if kind == "encoder":
        model = make_model(num_output_representations=2, scalar_mix_layer_norm=True)
    else:
        model = ElmoForTokenClassification(tiny_config(num_labels=3, use_crf=True)).eval()
    model.to("meta")
    output = model(inputs["input_ids"].to("meta"), attention_mask=inputs["attention_mask"].to("meta"),
                   **({"return_state": True} if kind == "encoder" else {}))
    assert output[0].device.type == "meta" and output[0].shape[:2] == (4, 9)
    with pytest.raises((RuntimeError, NotImplementedError)):  # the check has teeth
        bool(output[0].sum())


def test_no_words_at_all(model):
    output = model(torch.zeros(2, 0, 50, dtype=torch.long))
    assert output.last_hidden_state.shape == (2, 0, 16)


def test_damaged_or_mismatched_model_folders_fail_with_an_error(model, tmp_path):
    import json
    import shutil

    model.save_pretrained(tmp_path / "good")
    for name in ("truncated", "empty", "bigger_cells", "list_config"):
        shutil.copytree(tmp_path / "good", tmp_path / name)
    weights = tmp_path / "truncated" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (tmp_path / "empty" / "model.safetensors").write_bytes(b"")
    config = json.loads((tmp_path / "good" / "config.json").read_text())
    config["lstm_cell_dim"] *= 2
    (tmp_path / "bigger_cells" / "config.json").write_text(json.dumps(config))
    (tmp_path / "list_config" / "config.json").write_text("[1, 2]")
    for name in ("truncated", "empty"):  # safetensors' own checks of the file, as transformers reports them
        with pytest.raises(Exception) as raised:
            ElmoModel.from_pretrained(tmp_path / name)
        assert raised.type.__name__ in ("SafetensorError", "OSError", "EnvironmentError"), raised.type
    with pytest.raises(RuntimeError, match=SIZE_MISMATCH):  # transformers' size-mismatch error
        ElmoModel.from_pretrained(tmp_path / "bigger_cells")
    if TRANSFORMERS_MAJOR >= 5:
        with pytest.raises(ValueError, match="holds a JSON list"):
            ElmoModel.from_pretrained(tmp_path / "list_config")
    else:  # transformers 4.x fails in its own reading of the file, before ElmoConfig sees it
        with pytest.raises(TypeError, match="list indices must be integers"):
            ElmoModel.from_pretrained(tmp_path / "list_config")


def test_a_misspelt_forward_argument_is_an_error_not_ignored():
    from hf_elmo import ElmoConfig, ElmoForSequenceClassification, ElmoModel, ElmoTokenizer

    config = ElmoConfig(char_cnn_filters=[[1, 4]], char_embedding_dim=4, num_highway_layers=1, projection_dim=4,
                        lstm_cell_dim=8, num_lstm_layers=1)
    batch = ElmoTokenizer()(["a b"], return_tensors="pt")
    for model in (ElmoModel(config).eval(), ElmoForSequenceClassification(config).eval()):
        with pytest.raises(TypeError, match="unexpected keyword arguments: initial_states, return_states"):
            model(**batch, return_states=True, initial_states=None)
        model(**batch, output_attentions=False, token_type_ids=None)  # what transformers may pass: ignored


def test_weights_damaged_into_nan_are_refused_and_rewritten_weights_are_not(model, tmp_path):
    """Bytes overwritten inside a tensor (here 0xff: NaN) are found by the scan of the loaded values; weights that a
    standard tool rewrote (safetensors' own save_file) load."""
    from safetensors.torch import load_file, save_file

    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    save_file({name: tensor * 2 for name, tensor in weights.items()}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    ElmoModel.from_pretrained(tmp_path)
    data = bytearray((tmp_path / "model.safetensors").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 256] = b"\xff" * 256
    (tmp_path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="hold NaN or infinite values"):
        ElmoModel.from_pretrained(tmp_path)


def test_a_resumed_checkpoint_and_a_conversion_check_the_weights(model, tmp_path):
    import h5py

    from hf_elmo.convert.bilm_hdf5 import convert_bilm_to_folder, write_bilm_files
    from hf_elmo.pretraining.run import check_checkpoint_readable

    checkpoint = tmp_path / "checkpoint-5"
    model.save_pretrained(checkpoint)
    (checkpoint / "trainer_state.json").write_text("{}")
    check_checkpoint_readable(str(checkpoint))
    data = (checkpoint / "model.safetensors").read_bytes()
    (checkpoint / "model.safetensors").write_bytes(data[: len(data) // 2])  # cut short by a full disk
    with pytest.raises(ValueError, match="checkpoint-5 is damaged"):
        check_checkpoint_readable(str(checkpoint))
    write_bilm_files(model, tmp_path / "bilm")
    with h5py.File(tmp_path / "bilm" / "weights.hdf5", "r+") as handle:
        handle["CNN_proj/b_proj"][0] = float("nan")
    with pytest.raises(ValueError, match=r"\['CNN_proj/b_proj'\] hold NaN or infinite values"):
        convert_bilm_to_folder(tmp_path / "bilm" / "options.json", tmp_path / "bilm" / "weights.hdf5", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_model_saved_with_nan_weights_is_refused_naming_the_tensor(model, tmp_path):
    import copy

    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.char_encoder.projection.bias[0] = float("inf")
    broken.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"hold NaN or infinite values \(char_encoder.projection.bias\)"):
        ElmoModel.from_pretrained(tmp_path)
