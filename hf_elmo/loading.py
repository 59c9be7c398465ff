"""Finding a model: a local folder, 'default' (the model shipped in the package) or a Hub name, and its tokenizer.

Every command and `Embedder` resolve model names here, so the same name means the same model everywhere and
a name that leads nowhere gets the same one-line explanation. A Hub name is only looked up on the Hub when the
Hub can answer: offline (`HF_HUB_OFFLINE=1`) or with the endpoint unreachable, the local cache is used if it
holds the model, and otherwise the error says so at once instead of after minutes of retries.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import socket
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

# Seconds to wait for a TCP connection to the Hub endpoint before calling it unreachable.
HUB_PROBE_TIMEOUT = 3.0


class ModelNotFoundError(OSError):
    """The model name or path does not lead to a loadable ELMo model."""


def _looks_like_local_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else can only be meant as a folder.
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or os.sep in name.replace("/", "")


def resolve_model_name(model: str | os.PathLike | None) -> str:
    """`hf_elmo.DEFAULT_MODEL` (the shipped Chinese model) for `None` or the word ``"default"`` (unless a local
    folder has that name), else `model`."""
    from . import DEFAULT_MODEL

    if model is None:
        return DEFAULT_MODEL
    name = os.fspath(model)
    return DEFAULT_MODEL if name == "default" and not os.path.isdir(name) else name


# The command-line flag that named the model, set by the `hf-elmo` commands while they run so that the advice
# names it; unset, the caller is Python code, and the advice names Python's arguments.
MODEL_OPTION: contextvars.ContextVar[str | None] = contextvars.ContextVar("hf_elmo_model_option", default=None)


def _what_to_do_instead() -> str:
    option = MODEL_OPTION.get()
    default = f"{option} default" if option else "'default' or hf_elmo.DEFAULT_MODEL"
    return (
        f"use {default} (the Chinese model shipped with hf-elmo) or a local model folder; a model "
        "downloaded before is used from the cache with HF_HUB_OFFLINE=1, and HF_ENDPOINT points to a mirror"
    )


def hub_is_reachable(endpoint: str | None = None, timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """Whether a TCP connection to the Hub endpoint (HF_ENDPOINT, default https://huggingface.co) opens."""
    from huggingface_hub import constants

    parts = urlsplit(endpoint or constants.ENDPOINT)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _is_cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def check_local_model(name: str) -> bool:
    """Whether `name` is a local model folder (else it can only be a Hub name); `ModelNotFoundError` (one line)
    for a local folder that is missing, a file, or without config.json. Reads nothing but the file system, so the
    commands run it before torch is imported."""
    if os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, "config.json")):
            raise ModelNotFoundError(f"{name} has no config.json: it is not a saved hf-elmo model folder")
        return True
    if os.path.exists(name):
        raise ModelNotFoundError(f"{name} is a file, not a model folder")
    from . import DEFAULT_MODEL

    if os.path.abspath(name) == os.path.abspath(DEFAULT_MODEL):
        raise ModelNotFoundError(
            f"the default model is not in this installation ({name} is missing); pass a model folder or Hub id"
        )
    if _looks_like_local_path(name):
        raise ModelNotFoundError(f"model folder not found: {name}")
    return False


def check_model_location(name: str) -> dict:
    """Check that `name` can be loaded, before any loading; returns extra `from_pretrained` keyword arguments.

    `ModelNotFoundError` (one line) for a local folder that is missing, a file, or without config.json, and for
    a Hub name that is not cached when the Hub is offline or unreachable. A cached Hub name with the Hub
    unreachable loads from the cache (``local_files_only=True``)."""
    if check_local_model(name):
        return {}
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        if _is_cached(name):
            return {"local_files_only": True}
        raise ModelNotFoundError(
            f"{name!r} is no local folder, and HF_HUB_OFFLINE is set while the local Hub cache does not hold it; "
            + _what_to_do_instead()
        )
    if not hub_is_reachable():
        if _is_cached(name):
            logger.warning("the Hub (%s) is unreachable: loading %s from the local cache", constants.ENDPOINT, name)
            return {"local_files_only": True}
        raise ModelNotFoundError(
            f"{name!r} is no local folder, and the Hugging Face Hub ({constants.ENDPOINT}) cannot be reached "
            "to download it; " + _what_to_do_instead()
        )
    return {}


class TokenizerMismatchError(ValueError):
    """A tokenizer that does not write the ids its model reads (scheme, widths, vocabulary sizes)."""


def check_tokenizer_fits(tokenizer, config, name: str = "") -> None:
    """`TokenizerMismatchError` (one line) unless `tokenizer` writes the ids the model of `config` reads: the same
    character scheme and ids per word, a word vocabulary exactly when the model has a word embedding, and no
    character or word id beyond the model's embedding tables (naming the vocabulary file and the id). Every
    loader of a model with its tokenizer runs it (`load_tokenizer`), and the export of a model object."""
    where = f"{name}: " if name else ""
    problems = []
    if getattr(tokenizer, "char_scheme", None) != getattr(config, "char_scheme", "bytes"):
        problems.append(f"its character scheme is {getattr(tokenizer, 'char_scheme', None)!r}, the model's "
                        f"{getattr(config, 'char_scheme', 'bytes')!r}")
    if getattr(tokenizer, "max_characters_per_token", None) != config.max_characters_per_token:
        problems.append(f"it writes {getattr(tokenizer, 'max_characters_per_token', None)} ids per word, the model "
                        f"reads {config.max_characters_per_token}")
    word_vocab = getattr(tokenizer, "word_vocab", None)
    word_vocab_size = getattr(config, "word_vocab_size", 0) or 0
    if word_vocab_size and word_vocab is None:
        problems.append("the model has a word embedding but the tokenizer no word vocabulary")
    elif word_vocab is not None and not word_vocab_size:
        problems.append("the tokenizer has a word vocabulary but the model no word embedding")
    if problems:
        raise TokenizerMismatchError(where + "the tokenizer does not fit the model: " + "; ".join(problems))
    for vocabulary, size, file_name, what in (
        (getattr(tokenizer, "char_vocab", None), config.char_vocab_size, "char_vocab.json", "character"),
        (word_vocab, word_vocab_size, "word_vocab.json", "word"),
    ):
        if not vocabulary:
            continue
        entry, index = max(vocabulary.items(), key=lambda item: item[1])
        if index >= size:
            folder = getattr(tokenizer, "name_or_path", "") or name
            path = os.path.join(folder, file_name) if folder and os.path.isdir(folder) else (
                f"{folder}'s {file_name}" if folder else f"the tokenizer's {what} vocabulary")
            raise TokenizerMismatchError(
                f"{path} maps {entry!r} to id {index}, beyond the model's {size} {what} embeddings (ids 0-{size - 1}): "
                "this vocabulary is not the model's; save the model's own tokenizer beside it"
            )


def load_tokenizer(name: str, config, hub_kwargs: dict | None = None, user_dict: str | os.PathLike | None = None):
    """The tokenizer saved with the model `name`, segmenting with the jieba user dictionary `user_dict` when given
    (in place of one saved with it), checked to fit the model (`check_tokenizer_fits`). A folder without
    tokenizer_config.json gets, with a warning naming the folder, an `ElmoTokenizer` of the model's character
    scheme (the dictionary one from its char_vocab.json, else UTF-8 bytes), unless the model's word embedding needs
    its own dictionary or the dictionary scheme cannot be built (then `ModelNotFoundError` naming the file)."""
    tokenizer = _saved_tokenizer(name, config, hub_kwargs, user_dict)
    check_tokenizer_fits(tokenizer, config, name)
    return tokenizer


def _saved_tokenizer(name: str, config, hub_kwargs: dict | None = None, user_dict: str | os.PathLike | None = None):
    from .models.elmo.tokenization_elmo import ElmoTokenizer

    user_dict_kwargs = {} if user_dict is None else {"user_dict": os.fspath(user_dict)}
    if not os.path.isdir(name) or os.path.isfile(os.path.join(name, "tokenizer_config.json")):
        # The class a folder names is the one AutoTokenizer would pick; reading it here spares the Auto classes.
        if _saved_tokenizer_class(name) == "ElmoTokenizer":
            tokenizer_class = ElmoTokenizer
        else:
            from transformers import AutoTokenizer as tokenizer_class

            from . import register_auto_classes

            register_auto_classes(pretraining=False)  # (the commands that load an ElmoBiLm register nothing)
        try:
            return tokenizer_class.from_pretrained(name, **(hub_kwargs or {}), **user_dict_kwargs)
        except (OSError, ValueError):
            if os.path.isdir(name):
                raise
    if config.word_vocab_size:
        raise ModelNotFoundError(
            f"{name} has no tokenizer_config.json, and this model's word embedding needs its own dictionary "
            "(saved with its tokenizer); save the tokenizer beside the model"
        )
    if getattr(config, "char_scheme", "bytes") == "dictionary":
        return _dictionary_tokenizer(name, config, user_dict_kwargs)
    logger.warning(
        "%s has no tokenizer_config.json: using a default ElmoTokenizer (UTF-8 bytes, segmenter 'auto'); "
        "save the tokenizer the model was trained with beside it to use that one", name
    )
    return ElmoTokenizer(max_characters_per_token=config.max_characters_per_token, **user_dict_kwargs)


def _saved_tokenizer_class(folder: str) -> str | None:
    """The `tokenizer_class` of a local folder's tokenizer_config.json (None for a Hub name or an unreadable file)."""
    try:
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, ValueError):
        return None
    return saved.get("tokenizer_class") if isinstance(saved, dict) else None


def _dictionary_tokenizer(name: str, config, user_dict_kwargs: dict):
    """The tokenizer of a dictionary-scheme model folder without tokenizer_config.json, built from its
    char_vocab.json (a byte-scheme tokenizer would feed it ids of another alphabet)."""
    from .models.elmo.tokenization_elmo import ElmoTokenizer

    path = os.path.join(name, "char_vocab.json")
    if not os.path.isfile(path):
        raise ModelNotFoundError(
            f"{name} has no tokenizer_config.json, and its config.json says char_scheme 'dictionary', whose "
            f"character ids are in char_vocab.json, which is missing: save the tokenizer beside the model"
        )
    try:
        tokenizer = ElmoTokenizer(char_vocab_file=path, char_scheme="dictionary", name_or_path=name,
                                  max_characters_per_token=config.max_characters_per_token, **user_dict_kwargs)
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelNotFoundError(f"{path}: cannot build this dictionary-scheme model's tokenizer: {first_line}") from None
    logger.warning(
        "%s has no tokenizer_config.json: using an ElmoTokenizer with its char_vocab.json (segmenter %r); save "
        "the tokenizer the model was trained with beside it to use that one", name, tokenizer.segmenter
    )
    return tokenizer


class _HoldLoadReport(logging.Filter):
    """Keeps transformers' load report (a warning table) from being printed, holding it back instead."""

    def __init__(self):
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in record.getMessage():
            self.held.append(record)
            return False
        return True


def from_pretrained_noting_heads(model_class, name: str, **kwargs):
    """`model_class.from_pretrained(name, **kwargs)`; where a task model's folder (a tagger, a classifier, a
    pretraining run) is loaded for its biLM, one line says so in place of transformers' load report listing the
    head's weights as UNEXPECTED ("not ok if you expect identical arch"). Any other report is printed as it was."""
    report_logger = logging.getLogger("transformers.modeling_utils")
    report = _HoldLoadReport()
    report_logger.addFilter(report)
    try:
        loaded, info = model_class.from_pretrained(name, output_loading_info=True, **kwargs)
    finally:
        report_logger.removeFilter(report)
    from .models.elmo.bilm_elmo import weight_problems

    problem = weight_problems(loaded, info, name)  # what from_pretrained refuses when the caller does not inspect
    if problem:
        for record in report.held:
            report_logger.handle(record)
        raise ValueError(problem)
    unexpected = list(info.get("unexpected_keys") or [])
    only_a_head = unexpected and not any(info.get(key) for key in ("missing_keys", "mismatched_keys", "error_msgs"))
    if report.held and only_a_head:
        _note_head_weights(name, loaded.config, unexpected, model_class.__name__)
    else:
        for record in report.held:
            report_logger.handle(record)
    return loaded


def _note_head_weights(name: str, config, unexpected, model_name: str) -> None:
    heads = ", ".join(sorted({key.split(".")[0] for key in unexpected}))
    saved = ", ".join(getattr(config, "architectures", None) or []) or "a task model"
    logger.warning("%s holds %s: using its biLM as %s; its %s weights are left out", name, saved, model_name, heads)


def load_model_and_tokenizer(model=None, model_class=None, user_dict=None, bilm: bool = False):
    """Load `model_class` (default `ElmoModel`) and its tokenizer (with the jieba user dictionary `user_dict`, if
    given) from a folder, 'default' or a Hub id; returns (model, tokenizer, resolved name). Raises
    `ModelNotFoundError` with a one-line explanation when nothing loadable is there. `bilm=True` loads the encoder
    of a local folder as an `ElmoBiLm` (`load_bilm`), which starts faster, and of anything else as `ElmoModel`."""
    name = resolve_model_name(model)
    as_bilm = bilm and model_class is None and loads_as_bilm(name)
    if model_class is None and not as_bilm:
        from .models.elmo.modeling_elmo import ElmoModel as model_class
    import torch
    from safetensors import SafetensorError

    from . import kernels  # noqa: F401  (registers the kernels, where no registration has: "auto" is the default)

    hub_kwargs = check_model_location(name)
    try:
        # float32 whatever config.json's "dtype" says (transformers would load in that dtype): the commands
        # and `Embedder` compute in float32 unless asked for another dtype, which they cast to themselves.
        loaded = (load_bilm(name) if as_bilm else
                  from_pretrained_noting_heads(model_class, name, dtype=torch.float32, **hub_kwargs))
    except SafetensorError as error:
        raise ModelNotFoundError(f"cannot load model {name!r}: its safetensors weights are damaged or incomplete "
                                 f"({error}); save, convert or download the model again") from None
    except (OSError, ValueError, RuntimeError) as error:  # RuntimeError: transformers' size mismatch
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelNotFoundError(f"cannot load model {name!r}: {first_line}") from None
    return loaded, load_tokenizer(name, loaded.config, hub_kwargs, user_dict), name


def loads_as_bilm(name: str) -> bool:
    """Whether `load_bilm` takes `name`: a local folder with config.json and one model.safetensors."""
    return os.path.isfile(os.path.join(name, "config.json")) and os.path.isfile(os.path.join(name, "model.safetensors"))


def load_bilm(folder: str):
    """The encoder of the model saved in `folder` (an encoder, a task model or a pretraining run) as an `ElmoBiLm`
    in float32 on the CPU, on hf-elmo's kernels: the numbers and the refusals of `ElmoModel.from_pretrained`
    (`weight_problems`), without importing transformers' model classes (most of a command's start-up). Only the
    biLM's tensors are read; a task model's own weights are left out, with the warning `from_pretrained_noting_heads`
    gives (naming `ElmoModel`, as there: the same encoder)."""
    import torch
    from safetensors import safe_open

    from . import kernels  # noqa: F401  (registers the kernels: "auto" becomes the model's default)
    from .models.elmo.bilm_elmo import ElmoBiLm, weight_problems
    from .models.elmo.configuration_elmo import ElmoConfig

    bilm = ElmoBiLm(ElmoConfig.from_pretrained(folder))  # (initialising on the meta device imports torch's compiler)
    expected = bilm.state_dict()
    with safe_open(os.path.join(folder, "model.safetensors"), framework="pt") as weights:
        # As transformers loads a base model from a task model's weights: the prefix dropped where a key has it.
        prefix = "elmo."  # `base_model_prefix`
        keys = sorted(weights.keys(), key=lambda key: key.startswith(prefix))  # a prefixed key wins over its twin
        source = {key.removeprefix(prefix): key for key in keys}
        skipped = ElmoBiLm._keys_to_ignore_on_load_unexpected  # ElmoModel's too
        loading_info = {"missing_keys": [name for name in expected if name not in source],
                        "unexpected_keys": [key for name, key in source.items() if name not in expected
                                            and not any(re.search(pattern, key) for pattern in skipped)]}
        shapes = {name: tuple(weights.get_slice(key).get_shape()) for name, key in source.items() if name in expected}
        mismatched = [f"{source[name]}: {shapes[name]} in the checkpoint, {tuple(value.shape)} in the model"
                      for name, value in expected.items() if name in shapes and shapes[name] != tuple(value.shape)]
        if mismatched:
            raise ValueError(f"the weights do not fit the model of its config.json ({'; '.join(mismatched[:2])})")
        with torch.no_grad():
            for name, value in expected.items():
                if name in source:
                    value.copy_(weights.get_tensor(source[name]))
                elif not name.startswith("scalar_mixes."):  # a mix starts as ElmoModel starts one (w 0, gamma 1)
                    value.zero_()  # refused below: zeros keep the check of the values to the tensors that were there
    problem = weight_problems(bilm, loading_info, folder)
    if problem:
        raise ValueError(problem)
    if loading_info["unexpected_keys"]:
        _note_head_weights(folder, bilm.config, loading_info["unexpected_keys"], "ElmoModel")
    bilm.name_or_path = folder
    return bilm.eval()


__all__ = [
    "MODEL_OPTION",
    "ModelNotFoundError",
    "TokenizerMismatchError",
    "check_local_model",
    "check_model_location",
    "check_tokenizer_fits",
    "from_pretrained_noting_heads",
    "hub_is_reachable",
    "load_bilm",
    "loads_as_bilm",
    "load_model_and_tokenizer",
    "load_tokenizer",
    "resolve_model_name",
]
