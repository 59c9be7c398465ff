"""Reading and writing biLM weights in the bilm-tf ``dump_weights`` hdf5 layout (what AllenNLP loads).

TensorFlow stores matrices as (in, out), LSTM gate blocks as (i, j, f, o) and adds the forget
bias at run time; our `ElmoModel` stores LSTM weights (out, in), orders gates (i, f, g, o) and also
adds the forget bias at run time, so both directions of the conversion are pure reshuffles
(transpose, reorder): bit-exact round trips.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from .configuration_elmo import ElmoConfig
from .file_io import AtomicDirectory

# TF gate blocks (i, j, f, o) -> ours (i, f, j, o); the permutation is its own inverse.
_GATE_ORDER = [0, 2, 1, 3]


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_datasets(config: ElmoConfig) -> dict[str, tuple[int, ...]]:
    """Every dataset name of the bilm-tf layout with its expected shape."""
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (config.char_vocab_size - 1, config.char_embedding_dim)}
    for i, (width, count) in enumerate(config.char_cnn_filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, config.char_embedding_dim, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    filters = config.num_char_filters
    for k in range(config.num_highway_layers):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (filters, filters)
            shapes[f"CNN_high_{k}/b_{part}"] = (filters,)
    shapes["CNN_proj/W_proj"] = (filters, config.projection_dim)
    shapes["CNN_proj/b_proj"] = (config.projection_dim,)
    cell, projection = config.lstm_cell_dim, config.projection_dim
    for direction in range(2):
        for layer in range(config.num_lstm_layers):
            prefix = _lstm_prefix(direction, layer)
            shapes[f"{prefix}/W_0"] = (projection + projection, 4 * cell)
            shapes[f"{prefix}/B"] = (4 * cell,)
            shapes[f"{prefix}/W_P_0"] = (cell, projection)
    return shapes


def _reorder_gates(array: np.ndarray) -> np.ndarray:
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[i] for i in _GATE_ORDER], axis=-1)


def _read_datasets(weights_path: str | os.PathLike) -> dict[str, np.ndarray]:
    import h5py

    path = os.fspath(weights_path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not an hdf5 weights file")
    if not os.path.isfile(path):
        raise ValueError(f"weights file not found: {path}")
    arrays: dict[str, np.ndarray] = {}
    try:
        with h5py.File(path, "r") as handle:

            def visit(name, item):
                if isinstance(item, h5py.Dataset):
                    arrays[name] = np.asarray(item[...])

            handle.visititems(visit)
    except (OSError, KeyError, RuntimeError) as error:
        raise ValueError(f"cannot read {path} as hdf5 (truncated or not an hdf5 file?): {error}") from None
    return arrays


def state_dict_from_bilm_hdf5(config: ElmoConfig, weights_path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Load a bilm-tf ``weights.hdf5`` as an `ElmoModel` state dict (scalar mixes not included).

    Raises `ValueError` naming any missing, unexpected or wrongly shaped dataset.
    """
    arrays = _read_datasets(weights_path)
    expected = expected_datasets(config)
    # bilm-tf training checkpoints may carry the softmax; it is not part of the encoder.
    arrays = {name: value for name, value in arrays.items() if not name.startswith("softmax")}
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected))
    problems = []
    if missing:
        problems.append(f"missing datasets {missing}")
    if extra:
        problems.append(f"unexpected datasets {extra}")
    for name, shape in expected.items():
        if name in arrays and tuple(arrays[name].shape) != shape:
            problems.append(f"dataset {name} has shape {tuple(arrays[name].shape)}, expected {shape}")
    if problems:
        raise ValueError(f"{os.fspath(weights_path)} does not match the options: " + "; ".join(problems))

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))

    state: dict[str, torch.Tensor] = {}
    char_embed = arrays["char_embed"]
    state["char_encoder.char_embedding.weight"] = tensor(
        np.concatenate([np.zeros((1, char_embed.shape[1]), char_embed.dtype), char_embed])
    )
    for i in range(len(config.char_cnn_filters)):
        state[f"char_encoder.convolutions.{i}.weight"] = tensor(arrays[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0))
        state[f"char_encoder.convolutions.{i}.bias"] = tensor(arrays[f"CNN/b_cnn_{i}"])
    for k in range(config.num_highway_layers):
        weight = np.concatenate([arrays[f"CNN_high_{k}/W_transform"], arrays[f"CNN_high_{k}/W_carry"]], axis=1)
        bias = np.concatenate([arrays[f"CNN_high_{k}/b_transform"], arrays[f"CNN_high_{k}/b_carry"]])
        state[f"char_encoder.highway.layers.{k}.weight"] = tensor(weight.T)
        state[f"char_encoder.highway.layers.{k}.bias"] = tensor(bias)
    state["char_encoder.projection.weight"] = tensor(arrays["CNN_proj/W_proj"].T)
    state["char_encoder.projection.bias"] = tensor(arrays["CNN_proj/b_proj"])
    projection = config.projection_dim
    for layer in range(config.num_lstm_layers):
        per_direction = {"input_weight": [], "recurrent_weight": [], "bias": [], "projection_weight": []}
        for direction in range(2):
            prefix = _lstm_prefix(direction, layer)
            kernel = _reorder_gates(arrays[f"{prefix}/W_0"])
            # bilm-tf stores (in, out) kernels; ours are (out, in) like nn.Linear.
            per_direction["input_weight"].append(kernel[:projection].T)
            per_direction["recurrent_weight"].append(kernel[projection:].T)
            per_direction["bias"].append(_reorder_gates(arrays[f"{prefix}/B"]))
            per_direction["projection_weight"].append(arrays[f"{prefix}/W_P_0"].T)
        for name, pair in per_direction.items():
            state[f"bilstm.layers.{layer}.{name}"] = tensor(np.ascontiguousarray(np.stack(pair)))
    return state


def bilm_hdf5_datasets_from_state_dict(config: ElmoConfig, state: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The inverse of `state_dict_from_bilm_hdf5`: dataset name -> float32 array."""
    if config.char_scheme != "bytes" or config.word_vocab_size:
        raise ValueError(
            "the bilm-tf format holds byte-scheme models without a word embedding; this model reads characters "
            f"from a dictionary (char_scheme {config.char_scheme!r}) and/or has a {config.word_vocab_size}-word "
            "embedding (an ELMoForManyLangs model), which AllenNLP cannot load"
        )
    if config.lstm_forget_bias != 1.0:
        raise ValueError(
            f"bilm-tf adds a forget bias of 1.0 at run time; this model uses {config.lstm_forget_bias}"
        )

    def array(name: str) -> np.ndarray:
        if name not in state:
            raise ValueError(f"state dict has no {name}")
        return state[name].detach().to("cpu", torch.float32).numpy()

    datasets: dict[str, np.ndarray] = {"char_embed": array("char_encoder.char_embedding.weight")[1:]}
    for i in range(len(config.char_cnn_filters)):
        datasets[f"CNN/W_cnn_{i}"] = array(f"char_encoder.convolutions.{i}.weight").transpose(2, 1, 0)[None]
        datasets[f"CNN/b_cnn_{i}"] = array(f"char_encoder.convolutions.{i}.bias")
    filters = config.num_char_filters
    for k in range(config.num_highway_layers):
        weight = array(f"char_encoder.highway.layers.{k}.weight").T
        bias = array(f"char_encoder.highway.layers.{k}.bias")
        datasets[f"CNN_high_{k}/W_transform"], datasets[f"CNN_high_{k}/W_carry"] = weight[:, :filters], weight[:, filters:]
        datasets[f"CNN_high_{k}/b_transform"], datasets[f"CNN_high_{k}/b_carry"] = bias[:filters], bias[filters:]
    datasets["CNN_proj/W_proj"] = array("char_encoder.projection.weight").T
    datasets["CNN_proj/b_proj"] = array("char_encoder.projection.bias")
    for layer in range(config.num_lstm_layers):
        for direction in range(2):
            prefix = _lstm_prefix(direction, layer)
            kernel = np.concatenate(
                [
                    array(f"bilstm.layers.{layer}.input_weight")[direction].T,
                    array(f"bilstm.layers.{layer}.recurrent_weight")[direction].T,
                ]
            )
            datasets[f"{prefix}/W_0"] = _reorder_gates(kernel)
            datasets[f"{prefix}/B"] = _reorder_gates(array(f"bilstm.layers.{layer}.bias")[direction])
            datasets[f"{prefix}/W_P_0"] = array(f"bilstm.layers.{layer}.projection_weight")[direction].T
    return {name: np.ascontiguousarray(value) for name, value in datasets.items()}


def load_model_from_bilm(options_path, weights_path, **config_overrides):
    """An `ElmoModel` (eval mode) built from ``options.json`` + ``weights.hdf5``."""
    from .modeling_elmo import ElmoModel

    config = ElmoConfig.from_allennlp_options(options_path, **config_overrides)
    state = state_dict_from_bilm_hdf5(config, weights_path)
    model = ElmoModel(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    not_loaded = [name for name in missing if not name.startswith("scalar_mixes.")]
    if not_loaded or unexpected:
        raise RuntimeError(f"conversion bug: missing {not_loaded}, unexpected {unexpected}")
    return model.eval()


def write_bilm_files(model, output_dir: str | os.PathLike, overwrite: bool = False) -> Path:
    """Export an `ElmoModel` (or any model with `.config` and an ELMo state dict) as ``options.json`` +
    ``weights.hdf5`` in the bilm-tf layout, atomically."""
    import h5py

    config = model.config
    state = _encoder_state(model)
    datasets = bilm_hdf5_datasets_from_state_dict(config, state)
    options = config.to_allennlp_options()
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        with open(folder / "options.json", "w", encoding="utf-8") as handle:
            json.dump(options, handle, indent=2)
        with h5py.File(folder / "weights.hdf5", "w") as handle:
            for name, value in datasets.items():
                handle.create_dataset(name, data=value)
    return Path(output_dir)


def _encoder_state(model) -> dict[str, torch.Tensor]:
    """The `ElmoModel` part of a model's state dict, whether it is a bare encoder or has a head."""
    prefix = getattr(model, "base_model_prefix", "elmo")
    encoder = getattr(model, prefix, model)
    return encoder.state_dict()


def convert_bilm_to_folder(
    options_path,
    weights_path,
    output_dir,
    overwrite: bool = False,
    tokenizer_kwargs: dict | None = None,
    model_card=None,
) -> Path:
    """``options.json`` + ``weights.hdf5`` -> a folder `from_pretrained` loads (config, safetensors, tokenizer),
    with a README.md when a `huggingface_hub.ModelCard` is given."""
    from .tokenization_elmo import ElmoTokenizer

    AtomicDirectory(output_dir, overwrite=overwrite).check()  # before the (possibly long) conversion
    model = load_model_from_bilm(options_path, weights_path)
    tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token, **(tokenizer_kwargs or {}))
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        if model_card is not None:
            model_card.save(folder / "README.md")
    return Path(output_dir)


def export_folder_to_bilm(model_dir, output_dir, overwrite: bool = False) -> Path:
    """A saved hf-elmo folder (encoder or any head) -> ``options.json`` + ``weights.hdf5``."""
    from .modeling_elmo import ElmoModel

    # Only local folders: a missing path would otherwise be looked up on the Hub as a repo id.
    if os.path.isfile(model_dir):
        raise ValueError(f"{os.fspath(model_dir)} is a file, not a saved hf-elmo model folder")
    if not os.path.isdir(model_dir):
        raise ValueError(f"model folder not found: {os.fspath(model_dir)}")
    AtomicDirectory(output_dir, overwrite=overwrite).check()
    model = ElmoModel.from_pretrained(model_dir)
    return write_bilm_files(model, output_dir, overwrite=overwrite)
