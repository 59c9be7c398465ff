"""Reading and writing biLM weights in the bilm-tf ``dump_weights`` hdf5 layout (what AllenNLP loads).

TensorFlow stores matrices as (in, out), LSTM gate blocks as (i, j, f, o) and adds the forget
bias at run time; our `ElmoModel` stores LSTM weights (out, in), orders gates (i, f, g, o) and also
adds the forget bias at run time, so both directions of the conversion are pure reshuffles
(transpose, reorder): bit-exact round trips.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.utils import logging

from ..models.elmo.configuration_elmo import ElmoConfig
from ..utils.io import AtomicDirectory, load_json_file

logger = logging.get_logger(__name__)

def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


@dataclass(frozen=True)
class _Rename:
    """Our tensors `ours` <-> bilm-tf datasets `theirs` (of shapes `their_shapes`): `to_ours(*theirs arrays)`
    returns the `ours` arrays in order, `to_theirs(*ours arrays)` the `theirs` ones; the two are exact inverses
    (pure reshuffles)."""

    ours: tuple[str, ...]
    theirs: tuple[str, ...]
    their_shapes: tuple[tuple[int, ...], ...]
    to_ours: Callable[..., tuple[np.ndarray, ...]]
    to_theirs: Callable[..., tuple[np.ndarray, ...]]


def _same(*arrays):
    return arrays


def _transposed(*arrays):
    return tuple(array.T for array in arrays)


def _reorder_gates(array: np.ndarray) -> np.ndarray:
    """TF gate blocks (i, j, f, o) <-> ours (i, f, j, o) along the last axis; its own inverse."""
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[i] for i in (0, 2, 1, 3)], axis=-1)


def _lstm_rename(layer: int, projection_dim: int, cell_dim: int) -> _Rename:
    """One layer: bilm-tf keeps a direction's input and recurrent kernels as one (in + P, 4C) `W_0`, gates
    (i, j, f, o), in the `RNN_<direction>` scope; ours stack the directions and store (out, in)."""

    def to_ours(kernel_0, bias_0, projection_0, kernel_1, bias_1, projection_1):
        kernels = [_reorder_gates(kernel) for kernel in (kernel_0, kernel_1)]
        return (
            np.stack([kernel[:projection_dim].T for kernel in kernels]),
            np.stack([kernel[projection_dim:].T for kernel in kernels]),
            np.stack([_reorder_gates(bias_0), _reorder_gates(bias_1)]),
            np.stack([projection_0.T, projection_1.T]),
        )

    def to_theirs(input_weight, recurrent_weight, bias, projection_weight):
        per_direction = []
        for d in range(2):
            kernel = _reorder_gates(np.concatenate([input_weight[d].T, recurrent_weight[d].T]))
            per_direction += [kernel, _reorder_gates(bias[d]), projection_weight[d].T]
        return tuple(per_direction)

    ours = tuple(f"bilstm.layers.{layer}.{name}" for name in ("input_weight", "recurrent_weight", "bias", "projection_weight"))
    theirs = tuple(f"{_lstm_prefix(d, layer)}/{name}" for d in range(2) for name in ("W_0", "B", "W_P_0"))
    shapes = ((2 * projection_dim, 4 * cell_dim), (4 * cell_dim,), (cell_dim, projection_dim)) * 2
    return _Rename(ours, theirs, shapes, to_ours, to_theirs)


def _rename_table(config: ElmoConfig) -> list[_Rename]:
    """Every tensor of `ElmoModel` (scalar mixes aside) and the bilm-tf datasets it comes from, in one table
    that both directions of the conversion read."""
    filters, char_dim, projection_dim = config.num_char_filters, config.char_embedding_dim, config.projection_dim
    table = [
        _Rename(
            ("char_encoder.char_embedding.weight",), ("char_embed",), ((config.char_vocab_size - 1, char_dim),),
            lambda embed: (np.concatenate([np.zeros((1, embed.shape[1]), embed.dtype), embed]),),  # + padding row 0
            lambda weight: (weight[1:],),
        )
    ]
    for i, (width, count) in enumerate(config.char_cnn_filters):
        table.append(_Rename(
            (f"char_encoder.convolutions.{i}.weight",), (f"CNN/W_cnn_{i}",), ((1, width, char_dim, count),),
            lambda kernel: (kernel[0].transpose(2, 1, 0),),  # (1, width, dim, count) -> Conv1d's (count, dim, width)
            lambda weight: (weight.transpose(2, 1, 0)[None],),
        ))
        table.append(_Rename((f"char_encoder.convolutions.{i}.bias",), (f"CNN/b_cnn_{i}",), ((count,),), _same, _same))
    for k in range(config.num_highway_layers):
        table.append(_Rename(
            (f"char_encoder.highway.layers.{k}.weight", f"char_encoder.highway.layers.{k}.bias"),
            tuple(f"CNN_high_{k}/{name}" for name in ("W_transform", "W_carry", "b_transform", "b_carry")),
            ((filters, filters), (filters, filters), (filters,), (filters,)),
            lambda w_transform, w_carry, b_transform, b_carry: (
                np.concatenate([w_transform, w_carry], axis=1).T, np.concatenate([b_transform, b_carry])
            ),
            lambda weight, bias: (weight.T[:, :filters], weight.T[:, filters:], bias[:filters], bias[filters:]),
        ))
    table.append(_Rename(
        ("char_encoder.projection.weight",), ("CNN_proj/W_proj",), ((filters, projection_dim),), _transposed, _transposed
    ))
    table.append(_Rename(("char_encoder.projection.bias",), ("CNN_proj/b_proj",), ((projection_dim,),), _same, _same))
    table += [_lstm_rename(layer, projection_dim, config.lstm_cell_dim) for layer in range(config.num_lstm_layers)]
    return table


def expected_datasets(config: ElmoConfig) -> dict[str, tuple[int, ...]]:
    """Every dataset name of the bilm-tf layout with its expected shape."""
    return {name: shape for rule in _rename_table(config) for name, shape in zip(rule.theirs, rule.their_shapes)}


# Keys bilm-tf writes into training-time options files; they do not change the architecture.
_TRAINING_ONLY_KEYS = {
    "bidirectional",
    "dropout",
    "all_clip_norm_val",
    "batch_size",
    "n_epochs",
    "n_tokens_vocab",
    "unroll_steps",
    "n_negative_samples_batch",
    "n_train_tokens",
}
_KNOWN_CHAR_CNN_KEYS = {"embedding", "filters", "n_highway", "activation", "n_characters", "max_characters_per_token"}
_KNOWN_LSTM_KEYS = {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"}


def _read_options(path_or_dict: str | os.PathLike | dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The parsed options and what to call them in messages."""
    if isinstance(path_or_dict, dict):
        options, source = path_or_dict, "options"
    else:
        source = os.fspath(path_or_dict)
        options = load_json_file(source, "options file")
    if not isinstance(options, dict):
        raise ValueError(f"{source}: expected a JSON object with 'char_cnn' and 'lstm'")
    return options, source


def config_from_allennlp_options(path_or_dict: str | os.PathLike | dict[str, Any], **kwargs) -> ElmoConfig:
    """Build a config from an AllenNLP / bilm-tf ``options.json`` (path or parsed dict).

    Training-only keys (dropout, batch size, ...) are ignored; missing or contradictory
    architecture keys raise `ValueError` naming the key.
    """
    options, source = _read_options(path_or_dict)

    def require(section: dict, section_name: str, key: str):
        if key not in section:
            raise ValueError(f"{source}: missing required key '{section_name}.{key}'")
        return section[key]

    for section_name in ("char_cnn", "lstm"):
        if not isinstance(options.get(section_name), dict):
            raise ValueError(f"{source}: missing required section '{section_name}'")
    char_cnn, lstm = options["char_cnn"], options["lstm"]
    unknown = (set(options) - {"char_cnn", "lstm"} - _TRAINING_ONLY_KEYS) | {
        f"char_cnn.{k}" for k in set(char_cnn) - _KNOWN_CHAR_CNN_KEYS
    } | {f"lstm.{k}" for k in set(lstm) - _KNOWN_LSTM_KEYS - _TRAINING_ONLY_KEYS}
    if unknown:
        logger.warning("%s: ignoring unknown option keys %s", source, sorted(unknown))
    if options.get("bidirectional", True) is not True:
        raise ValueError(f"{source}: 'bidirectional' is {options['bidirectional']!r}; ELMo needs both directions")

    n_characters = require(char_cnn, "char_cnn", "n_characters")
    if n_characters not in (261, 262):
        raise ValueError(
            f"{source}: char_cnn.n_characters must be 261 (training) or 262 (prediction) for the byte scheme, "
            f"got {n_characters}"
        )
    embedding = require(char_cnn, "char_cnn", "embedding")
    if not isinstance(embedding, dict) or "dim" not in embedding:
        raise ValueError(f"{source}: missing required key 'char_cnn.embedding.dim'")
    filters = require(char_cnn, "char_cnn", "filters")
    if not (isinstance(filters, list) and all(isinstance(f, list) and len(f) == 2 for f in filters)):
        raise ValueError(f"{source}: char_cnn.filters must be a list of [width, count] pairs, got {filters!r}")
    cell_dim = require(lstm, "lstm", "dim")
    projection_dim = lstm.get("projection_dim", cell_dim)
    use_skip = lstm.get("use_skip_connections", False)
    if not isinstance(use_skip, bool):
        raise ValueError(f"{source}: lstm.use_skip_connections must be true or false, got {use_skip!r}")
    architecture = dict(
        char_vocab_size=262,
        char_embedding_dim=embedding["dim"],
        char_cnn_filters=filters,
        num_highway_layers=require(char_cnn, "char_cnn", "n_highway"),
        char_cnn_activation=char_cnn.get("activation", "relu"),
        max_characters_per_token=char_cnn.get("max_characters_per_token", 50),
        projection_dim=projection_dim,
        lstm_cell_dim=cell_dim,
        num_lstm_layers=require(lstm, "lstm", "n_layers"),
        cell_clip=lstm.get("cell_clip"),
        proj_clip=lstm.get("proj_clip"),
        use_skip_connections=use_skip,
    )
    try:
        return ElmoConfig(**architecture, **kwargs)
    except ValueError as error:  # say which file the inconsistent values came from
        raise ValueError(f"{source}: {error}") from None


def allennlp_options(config: ElmoConfig) -> dict[str, Any]:
    """The prediction-time ``options.json`` that AllenNLP and bilm-tf read."""
    if config.char_scheme != "bytes" or config.word_vocab_size:
        raise ValueError("only byte-scheme models without a word embedding have an AllenNLP / bilm-tf layout")
    return {
        "lstm": {
            "use_skip_connections": config.use_skip_connections,
            "projection_dim": config.projection_dim,
            "cell_clip": config.cell_clip or 0,
            "proj_clip": config.proj_clip or 0,
            "dim": config.lstm_cell_dim,
            "n_layers": config.num_lstm_layers,
        },
        "char_cnn": {
            "activation": config.char_cnn_activation,
            "filters": config.char_cnn_filters,
            "n_highway": config.num_highway_layers,
            "embedding": {"dim": config.char_embedding_dim},
            "n_characters": 262,
            "max_characters_per_token": config.max_characters_per_token,
        },
    }


def _read_datasets(weights_path: str | os.PathLike, expected: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """The datasets of a bilm-tf ``weights.hdf5`` (the softmax of a training checkpoint left out), after every
    name, shape and dtype was checked against `expected` from the file's metadata: a wrong or huge dataset is
    refused by name before any data is read (a 100000 x 100000 one would otherwise be allocated in full)."""
    import h5py

    path = os.fspath(weights_path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not an hdf5 weights file")
    if not os.path.isfile(path):
        raise ValueError(f"weights file not found: {path}")
    try:
        with h5py.File(path, "r") as handle:
            datasets: dict[str, h5py.Dataset] = {}

            def visit(name, item):
                # bilm-tf training checkpoints may carry the softmax; it is not part of the encoder.
                if isinstance(item, h5py.Dataset) and not name.startswith("softmax"):
                    datasets[name] = item

            handle.visititems(visit)
            problems = layout_problems({name: item.shape for name, item in datasets.items()}, expected, "datasets",
                                       "dataset {}")
            problems += [
                f"dataset {name} holds {_dtype_name(item.dtype)}, not floating-point weights"
                for name, item in sorted(datasets.items()) if name in expected and item.dtype.kind != "f"
            ]
            if problems:
                raise _LayoutError(f"{path} does not match the options: " + "; ".join(problems))
            return {name: np.asarray(item[...]) for name, item in datasets.items()}
    except _LayoutError as error:
        raise ValueError(str(error)) from None
    except (OSError, KeyError, RuntimeError) as error:
        raise ValueError(f"cannot read {path} as hdf5 (truncated or not an hdf5 file?): {error}") from None


class _LayoutError(Exception):
    """A weights file whose datasets are not the layout of the options (raised inside the hdf5 reading)."""


def _dtype_name(dtype: np.dtype) -> str:
    import h5py

    if h5py.check_string_dtype(dtype) is not None or dtype.kind in "SUO":
        return "strings"
    return f"{dtype} values"


def layout_problems(found: dict, expected: dict, kind: str, name_format: str = "{}") -> list[str]:
    """What keeps named arrays of the shapes `found` from being the `expected` layout: missing and unexpected
    names (`kind`: "datasets", "keys") and wrong shapes, each as a phrase for an error message."""
    problems = []
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing:
        problems.append(f"missing {kind} {missing}")
    if unexpected:
        problems.append(f"unexpected {kind} {unexpected}")
    for name, shape in expected.items():
        if name in found and tuple(found[name]) != tuple(shape):
            problems.append(f"{name_format.format(name)} has shape {tuple(found[name])}, expected {tuple(shape)}")
    return problems


def state_dict_from_bilm_hdf5(config: ElmoConfig, weights_path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Load a bilm-tf ``weights.hdf5`` as an `ElmoModel` state dict (scalar mixes not included).

    Raises `ValueError` naming any missing, unexpected or wrongly shaped dataset.
    """
    arrays = _read_datasets(weights_path, expected_datasets(config))
    damaged = sorted(name for name, value in arrays.items() if value.dtype.kind == "f" and not np.isfinite(value).all())
    if damaged:
        raise ValueError(
            f"{os.fspath(weights_path)}: datasets {damaged} hold NaN or infinite values; the weights are damaged"
        )
    state = {}
    for rule in _rename_table(config):
        for name, value in zip(rule.ours, rule.to_ours(*(arrays[name] for name in rule.theirs))):
            state[name] = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
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

    datasets = {}
    for rule in _rename_table(config):
        datasets.update(zip(rule.theirs, rule.to_theirs(*(array(name) for name in rule.ours))))
    return {name: np.ascontiguousarray(value) for name, value in datasets.items()}


def load_model_from_bilm(options_path, weights_path, **config_overrides):
    """An `ElmoModel` (eval mode) built from ``options.json`` + ``weights.hdf5``."""
    config = config_from_allennlp_options(options_path, **config_overrides)
    return model_from_encoder_state(config, state_dict_from_bilm_hdf5(config, weights_path))


def model_from_encoder_state(config: ElmoConfig, state: dict[str, torch.Tensor]):
    """An `ElmoModel` (eval mode) holding a converted encoder state dict; its scalar mixes start fresh (neither
    format stores them). A name left out or left over is a bug in a converter's rename table."""
    from ..models.elmo.modeling_elmo import ElmoModel

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
    options = allennlp_options(config)
    # The HDF5 image is built in memory and written with one plain write: HDF5 writing to a disk that fills
    # up fails inside its own cleanup (tracebacks, then a segmentation fault), a plain write raises ENOSPC.
    image = io.BytesIO()
    with h5py.File(image, "w") as handle:
        for name, value in datasets.items():
            handle.create_dataset(name, data=value)
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        with open(folder / "options.json", "w", encoding="utf-8") as handle:
            json.dump(options, handle, indent=2)
        with open(folder / "weights.hdf5", "wb") as handle:
            handle.write(image.getbuffer())
    return Path(output_dir)


def _encoder_state(model) -> dict[str, torch.Tensor]:
    """The `ElmoModel` part of a model's state dict, whether it is a bare encoder or has a head."""
    prefix = getattr(model, "base_model_prefix", "elmo")
    encoder = getattr(model, prefix, model)
    return encoder.state_dict()


#: How the tokenizer of a converted bilm-tf / AllenNLP model splits raw text unless told otherwise: on whitespace
#: only, as the models' training data was split (no punctuation splitting, no Chinese segmentation).
BILM_SEGMENTER = "whitespace"


def convert_bilm_to_folder(
    options_path,
    weights_path,
    output_dir,
    overwrite: bool = False,
    tokenizer_kwargs: dict | None = None,
    model_card=None,
) -> Path:
    """``options.json`` + ``weights.hdf5`` -> a folder `from_pretrained` loads (config, safetensors, tokenizer),
    with a README.md when a `huggingface_hub.ModelCard` is given.

    The tokenizer splits raw text on whitespace only (`BILM_SEGMENTER`): bilm-tf and AllenNLP models were trained on
    pre-tokenised text, and `allennlp elmo` split its input lines the same way. A Chinese bilm-tf model trained on
    jieba words or single characters gets its segmenter with ``tokenizer_kwargs={"segmenter": "jieba"}`` (or
    ``"chars"``)."""
    from ..models.elmo.tokenization_elmo import ElmoTokenizer

    AtomicDirectory(output_dir, overwrite=overwrite).check()  # before the (possibly long) conversion
    model = load_model_from_bilm(options_path, weights_path)
    tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token,
                              **{"segmenter": BILM_SEGMENTER, **(tokenizer_kwargs or {})})
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        if model_card is not None:
            model_card.save(folder / "README.md")
    return Path(output_dir)


def export_folder_to_bilm(model_dir, output_dir, overwrite: bool = False) -> Path:
    """A saved hf-elmo folder (encoder or any head) -> ``options.json`` + ``weights.hdf5``."""
    from ..models.elmo.modeling_elmo import ElmoModel

    # Only local folders: a missing path would otherwise be looked up on the Hub as a repo id.
    if os.path.isfile(model_dir):
        raise ValueError(f"{os.fspath(model_dir)} is a file, not a saved hf-elmo model folder")
    if not os.path.isdir(model_dir):
        raise ValueError(f"model folder not found: {os.fspath(model_dir)}")
    AtomicDirectory(output_dir, overwrite=overwrite).check()
    from ..loading import from_pretrained_noting_heads

    # The weights as saved, whatever config.json's dtype; a folder that lacks tensors of the biLM is refused (they
    # would be exported with their random initial values).
    model = from_pretrained_noting_heads(ElmoModel, model_dir, dtype=torch.float32)
    return write_bilm_files(model, output_dir, overwrite=overwrite)
