"""Reading ELMoForManyLangs (HIT-SCIR) model folders, e.g. ``zhs.model``, into `ElmoModel` + `ElmoTokenizer`.

A folder holds ``config.json`` (training arguments; ``config_path`` names the model config), ``char.dic`` and
``word.dic`` (``token<TAB>id``), ``token_embedder.pkl`` and ``encoder.pkl`` (PyTorch state dicts). The mapping:

* character ids: ours = theirs + 1, with an all-zero row 0 in front of their embedding table, so that 0 keeps
  meaning "padded word position" in ``input_ids``. Their ``<pad>`` character row is a real (non-zero) vector that
  fills every word's row after ``<bow>``; it stays exactly as trained.
* word ids: unchanged; the word embedding is copied as is (its ``<pad>`` row is non-zero too, and unused).
* ``<S>`` / ``</S>`` rows (``config.bos_char_ids`` / ``eos_char_ids``) are ``[<eow>, <bos>|<eos>, <bow>, <pad>...]``
  (their begin/end-of-word swap, reproduced), the word ids of ``<bos>`` / ``<eos>`` become ``bos_word_id`` /
  ``eos_word_id``.
* highway: their layout is AllenNLP's ``[transform; gate]`` with ``y = g * x + (1 - g) * f(t)``; ours is
  ``[transform; carry]`` with ``y = c * f(t) + (1 - c) * x``, so the gate half is negated (``c = 1 - g``).
* LSTM: AllenNLP's ``LstmCellWithProjection`` (gates i, f, g, o; bias only on the state product; no forget bias
  added at run time) -> our layout (the same (out, in) weights) with ``lstm_forget_bias = 0``; skip connections on layers >= 1.

The pickles are read with ``torch.load(weights_only=True)``: plain tensors only, no code execution.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..models.elmo.configuration_elmo import ElmoConfig
from ..utils.io import AtomicDirectory
from .bilm_hdf5 import layout_problems, model_from_encoder_state

CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
WORD_SPECIALS = ("<oov>", "<bos>", "<eos>", "<pad>")

# The model configs `elmoformanylangs` 0.0.4.post2 ships in its `configs/` folder (both files hold the same
# values); the package falls back to them when a model folder lacks its config, and so do we.
_STANDARD_MODEL_CONFIG = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
PACKAGED_MODEL_CONFIGS = {
    "cnn_50_100_512_4096_sample.json": _STANDARD_MODEL_CONFIG,
    "cnn_0_100_512_4096_sample.json": _STANDARD_MODEL_CONFIG,
}


@dataclass
class ElmoForManyLangsFolder:
    """The parsed contents of a model folder."""

    model_config: dict[str, Any]
    model_config_source: str
    char_lexicon: dict[str, int]
    word_lexicon: dict[str, int] | None
    token_embedder: dict[str, torch.Tensor]
    encoder: dict[str, torch.Tensor]


# Reading the folder ---------------------------------------------------------------------------


def read_dictionary(path: str | os.PathLike) -> dict[str, int]:
    """Parse ``char.dic`` / ``word.dic`` exactly as ELMoForManyLangs does.

    Each line is ``line.strip().split('\\t')``; a line left with one field is the token U+3000 (its whitespace
    was stripped away); a later line wins over an earlier one with the same token.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"missing file: {path}")
    from ..utils.io import decode_utf8

    lexicon: dict[str, int] = {}
    text = decode_utf8(path.read_bytes(), path, "utf-8")  # bytes that are not UTF-8: file and line named
    with io.StringIO(text, newline=None) as handle:  # line ends as a file opened in text mode reads them
        for number, line in enumerate(handle, start=1):
            fields = line.strip().split("\t")
            if len(fields) == 1:
                fields.insert(0, "\u3000")
            if len(fields) != 2:
                raise ValueError(f"{path}:{number}: expected 'token<TAB>id', got {line.rstrip()!r}")
            token, index = fields
            try:
                lexicon[token] = int(index)
            except ValueError:
                raise ValueError(f"{path}:{number}: id {index!r} is not an integer") from None
    if not lexicon:
        raise ValueError(f"{path} is empty")
    return lexicon


def resolve_model_config(model_dir: str | os.PathLike, config_path: str | os.PathLike | None = None):
    """Find the model config JSON the way ELMoForManyLangs does; returns ``(config dict, where it came from)``.

    With `config_path` that file is used. Otherwise ``config.json``'s ``config_path`` is tried relative to the
    folder, then its file name inside the folder, then the configs the package ships.
    """
    model_dir = Path(model_dir)
    if config_path is not None:
        return _read_json(Path(config_path), "model config"), os.fspath(config_path)
    training_args = _read_json(model_dir / "config.json", "training config")
    named = training_args.get("config_path")
    if not isinstance(named, str) or not named:
        raise ValueError(
            f"{model_dir / 'config.json'} has no 'config_path'; pass the model config with --config-path"
        )
    candidates = [model_dir / named, model_dir / os.path.basename(named)]
    for candidate in candidates:
        if candidate.is_file():
            return _read_json(candidate, "model config"), os.fspath(candidate)
    if os.path.basename(named) in PACKAGED_MODEL_CONFIGS:
        return PACKAGED_MODEL_CONFIGS[os.path.basename(named)], f"elmoformanylangs configs/{os.path.basename(named)}"
    tried = ", ".join(os.fspath(c) for c in candidates)
    raise ValueError(
        f"model config {named!r} (config_path in {model_dir / 'config.json'}) not found (tried {tried}); "
        "pass it with --config-path / config_path="
    )


def _read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"missing file: {path} ({what})")
    try:
        with open(path, encoding="utf-8-sig") as handle:
            value = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} ({what}) is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} ({what}) must hold a JSON object")
    return value


def load_state_dict_file(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A ``.pkl`` state dict, loaded with ``weights_only=True`` (tensors only; refuses anything executable)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"missing file: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        from ..utils.checkpoints import unpickling_refusal

        raise ValueError(unpickling_refusal(path, error)) from None
    except Exception as error:  # torch's readers fail on other files in many ways (KeyError on plain text)
        raise ValueError(
            f"cannot read {path} as a PyTorch file (truncated, corrupt or another format?): {type(error).__name__}: {error}"
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(key, str) and isinstance(value, torch.Tensor) for key, value in state.items()
    ):
        raise ValueError(f"{path} must hold a state dict (parameter name -> tensor)")
    return dict(state)


def read_model_folder(
    model_dir: str | os.PathLike, config_path: str | os.PathLike | None = None
) -> ElmoForManyLangsFolder:
    model_dir = Path(model_dir)
    if model_dir.is_file():
        raise ValueError(f"{model_dir} is a file; give the ELMoForManyLangs model folder")
    if not model_dir.is_dir():
        raise ValueError(f"model folder not found: {model_dir}")
    model_config, source = resolve_model_config(model_dir, config_path)
    _check_model_config(model_config, source)
    embedder = model_config["token_embedder"]
    char_lexicon = read_dictionary(model_dir / "char.dic")
    word_lexicon = read_dictionary(model_dir / "word.dic") if embedder["word_dim"] > 0 else None
    return ElmoForManyLangsFolder(
        model_config=model_config,
        model_config_source=source,
        char_lexicon=char_lexicon,
        word_lexicon=word_lexicon,
        token_embedder=load_state_dict_file(model_dir / "token_embedder.pkl"),
        encoder=load_state_dict_file(model_dir / "encoder.pkl"),
    )


def _check_model_config(config: dict[str, Any], source: str) -> None:
    required = {
        "encoder": ("name", "projection_dim", "dim", "n_layers"),
        "token_embedder": ("name", "activation", "filters", "n_highway", "word_dim", "char_dim"),
    }
    for section, keys in required.items():
        if not isinstance(config.get(section), dict):
            raise ValueError(f"{source}: missing section '{section}'")
        missing = [f"{section}.{key}" for key in keys if key not in config[section]]
        if missing:
            raise ValueError(f"{source}: missing keys {missing}")
    encoder, embedder = config["encoder"], config["token_embedder"]
    if str(encoder["name"]).lower() != "elmo":
        raise ValueError(f"{source}: encoder.name {encoder['name']!r} is not supported (only 'elmo')")
    if str(embedder["name"]).lower() != "cnn":
        raise ValueError(f"{source}: token_embedder.name {embedder['name']!r} is not supported (only 'cnn')")
    if not embedder["char_dim"] > 0:
        raise ValueError(f"{source}: word-only models (token_embedder.char_dim 0) are not supported")
    filters = embedder["filters"]
    if not (isinstance(filters, list) and filters and all(isinstance(f, list) and len(f) == 2 for f in filters)):
        raise ValueError(f"{source}: token_embedder.filters must be a list of [width, count] pairs, got {filters!r}")


# Mapping to hf-elmo -----------------------------------------------------------------------------


def _check_specials(lexicon: dict[str, int], names, what: str) -> None:
    missing = [name for name in names if name not in lexicon]
    if missing:
        raise ValueError(f"{what} lacks the special entries {missing}")


def elmo_config_from_folder(folder: ElmoForManyLangsFolder) -> ElmoConfig:
    encoder, embedder = folder.model_config["encoder"], folder.model_config["token_embedder"]
    chars = folder.char_lexicon
    _check_specials(chars, CHAR_SPECIALS, "char.dic")
    char_rows = _rows(folder.token_embedder, "char_emb_layer.embedding.weight", "token_embedder.pkl")
    _check_ids(chars, char_rows, "char.dic")
    width = embedder.get("max_characters_per_token", 50)

    def boundary_row(boundary: str) -> list[int]:
        row = [chars["<eow>"], chars[boundary], chars["<bow>"]] + [chars["<pad>"]] * (width - 3)
        return [i + 1 for i in row]

    word_kwargs = {}
    if folder.word_lexicon is not None:
        _check_specials(folder.word_lexicon, WORD_SPECIALS, "word.dic")
        word_rows = _rows(folder.token_embedder, "word_emb_layer.embedding.weight", "token_embedder.pkl")
        _check_ids(folder.word_lexicon, word_rows, "word.dic")
        word_kwargs = {
            "word_vocab_size": word_rows,
            "word_embedding_dim": embedder["word_dim"],
            "bos_word_id": folder.word_lexicon["<bos>"],
            "eos_word_id": folder.word_lexicon["<eos>"],
        }
    return ElmoConfig(
        char_vocab_size=char_rows + 1,
        char_embedding_dim=embedder["char_dim"],
        char_cnn_filters=embedder["filters"],
        num_highway_layers=embedder["n_highway"],
        char_cnn_activation=embedder["activation"],
        max_characters_per_token=width,
        projection_dim=encoder["projection_dim"],
        lstm_cell_dim=encoder["dim"],
        num_lstm_layers=encoder["n_layers"],
        cell_clip=encoder.get("cell_clip"),
        proj_clip=encoder.get("proj_clip"),
        use_skip_connections=True,
        lstm_forget_bias=0.0,
        char_scheme="dictionary",
        bos_char_ids=boundary_row("<bos>"),
        eos_char_ids=boundary_row("<eos>"),
        **word_kwargs,
    )


def _rows(state: dict[str, torch.Tensor], key: str, source: str) -> int:
    if key not in state:
        raise ValueError(f"{source} has no '{key}'")
    if state[key].dim() != 2:
        raise ValueError(f"{source}: '{key}' must be a matrix, got shape {tuple(state[key].shape)}")
    return state[key].shape[0]


def expected_shapes(config: ElmoConfig) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """Parameter name -> shape in ``token_embedder.pkl`` and in ``encoder.pkl``."""
    filters = config.num_char_filters
    embedder = {"char_emb_layer.embedding.weight": (config.char_vocab_size - 1, config.char_embedding_dim)}
    if config.word_vocab_size:
        embedder["word_emb_layer.embedding.weight"] = (config.word_vocab_size, config.word_embedding_dim)
    for i, (width, count) in enumerate(config.char_cnn_filters):
        embedder[f"convolutions.{i}.weight"] = (count, config.char_embedding_dim, width)
        embedder[f"convolutions.{i}.bias"] = (count,)
    for k in range(config.num_highway_layers):
        embedder[f"highways._layers.{k}.weight"] = (2 * filters, filters)
        embedder[f"highways._layers.{k}.bias"] = (2 * filters,)
    embedder["projection.weight"] = (config.projection_dim, filters + config.word_embedding_dim)
    embedder["projection.bias"] = (config.projection_dim,)
    cell, projection = config.lstm_cell_dim, config.projection_dim
    encoder = {}
    for layer in range(config.num_lstm_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = (4 * cell, projection)
            encoder[f"{prefix}.state_linearity.weight"] = (4 * cell, projection)
            encoder[f"{prefix}.state_linearity.bias"] = (4 * cell,)
            encoder[f"{prefix}.state_projection.weight"] = (projection, cell)
    return embedder, encoder


def _check_state(state: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]], source: str) -> None:
    found = {name: tuple(value.shape) for name, value in state.items()}
    problems = layout_problems(found, expected, "keys", "'{}'")
    problems += [
        f"'{name}' has dtype {state[name].dtype}, expected floating point"
        for name, shape in expected.items()
        if found.get(name) == tuple(shape) and not state[name].is_floating_point()
    ]
    if problems:
        raise ValueError(f"{source} does not match the model config: " + "; ".join(problems))


def _check_ids(lexicon: dict[str, int], rows: int, what: str) -> None:
    bad = sorted({index for index in lexicon.values() if not 0 <= index < rows})
    if bad:
        raise ValueError(f"{what} has ids {bad[:10]} outside the {rows} rows of its embedding table")


def state_dict_from_folder(config: ElmoConfig, folder: ElmoForManyLangsFolder) -> dict[str, torch.Tensor]:
    """Their two state dicts -> an `ElmoModel` state dict (scalar mixes not included)."""
    expected_embedder, expected_encoder = expected_shapes(config)
    _check_state(folder.token_embedder, expected_embedder, "token_embedder.pkl")
    _check_state(folder.encoder, expected_encoder, "encoder.pkl")

    def tensor(source: dict[str, torch.Tensor], name: str) -> torch.Tensor:
        return source[name].detach().to(torch.float32).contiguous()

    embedder = folder.token_embedder
    chars = tensor(embedder, "char_emb_layer.embedding.weight")
    state = {"char_encoder.char_embedding.weight": torch.cat([chars.new_zeros(1, chars.shape[1]), chars])}
    if config.word_vocab_size:
        state["char_encoder.word_embedding.weight"] = tensor(embedder, "word_emb_layer.embedding.weight")
    for i in range(len(config.char_cnn_filters)):
        state[f"char_encoder.convolutions.{i}.weight"] = tensor(embedder, f"convolutions.{i}.weight")
        state[f"char_encoder.convolutions.{i}.bias"] = tensor(embedder, f"convolutions.{i}.bias")
    filters = config.num_char_filters
    for k in range(config.num_highway_layers):
        weight = tensor(embedder, f"highways._layers.{k}.weight").clone()
        bias = tensor(embedder, f"highways._layers.{k}.bias").clone()
        # Their gate keeps x; our carry gate picks the transform: sigmoid(-z) = 1 - sigmoid(z).
        weight[filters:] = -weight[filters:]
        bias[filters:] = -bias[filters:]
        state[f"char_encoder.highway.layers.{k}.weight"] = weight
        state[f"char_encoder.highway.layers.{k}.bias"] = bias
    state["char_encoder.projection.weight"] = tensor(embedder, "projection.weight")
    state["char_encoder.projection.bias"] = tensor(embedder, "projection.bias")
    encoder = folder.encoder
    for layer in range(config.num_lstm_layers):
        parts = {"input_weight": [], "recurrent_weight": [], "bias": [], "projection_weight": []}
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            parts["input_weight"].append(tensor(encoder, f"{prefix}.input_linearity.weight"))
            parts["recurrent_weight"].append(tensor(encoder, f"{prefix}.state_linearity.weight"))
            parts["bias"].append(tensor(encoder, f"{prefix}.state_linearity.bias"))
            parts["projection_weight"].append(tensor(encoder, f"{prefix}.state_projection.weight"))
        for name, pair in parts.items():
            state[f"bilstm.layers.{layer}.{name}"] = torch.stack(pair).contiguous()
    return state


def tokenizer_vocabularies(folder: ElmoForManyLangsFolder) -> dict[str, dict[str, int]]:
    """``char_vocab`` (their id + 1) and, with a word embedding, ``word_vocab`` (their id) for `ElmoTokenizer`."""
    vocabularies = {"char_vocab": {char: index + 1 for char, index in folder.char_lexicon.items()}}
    if folder.word_lexicon is not None:
        vocabularies["word_vocab"] = dict(folder.word_lexicon)
    return vocabularies


# Entry points -----------------------------------------------------------------------------------


def load_model_from_elmoformanylangs(model_dir, config_path=None, **tokenizer_kwargs):
    """``(ElmoModel in eval mode, ElmoTokenizer)`` from an ELMoForManyLangs model folder."""
    from ..models.elmo.tokenization_elmo import ElmoTokenizer

    folder = read_model_folder(model_dir, config_path)
    config = elmo_config_from_folder(folder)
    model = model_from_encoder_state(config, state_dict_from_folder(config, folder))
    tokenizer = ElmoTokenizer(
        max_characters_per_token=config.max_characters_per_token,
        char_scheme="dictionary",
        **tokenizer_vocabularies(folder),
        **tokenizer_kwargs,
    )
    return model.eval(), tokenizer


def convert_elmoformanylangs_to_folder(
    model_dir, output_dir, config_path=None, overwrite: bool = False, tokenizer_kwargs: dict | None = None
) -> Path:
    """An ELMoForManyLangs folder -> a folder `from_pretrained` loads (config, safetensors, tokenizer), atomically."""
    AtomicDirectory(output_dir, overwrite=overwrite).check()  # before the model is read
    model, tokenizer = load_model_from_elmoformanylangs(model_dir, config_path, **(tokenizer_kwargs or {}))
    with AtomicDirectory(output_dir, overwrite=overwrite) as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return Path(output_dir)


__all__ = [
    "ElmoForManyLangsFolder",
    "convert_elmoformanylangs_to_folder",
    "elmo_config_from_folder",
    "expected_shapes",
    "load_model_from_elmoformanylangs",
    "load_state_dict_file",
    "read_dictionary",
    "read_model_folder",
    "resolve_model_config",
    "state_dict_from_folder",
    "tokenizer_vocabularies",
]
