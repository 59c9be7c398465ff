"""`export_onnx`: an ELMo encoder -> a folder with `model.onnx`, the tokenizer files and a README of the interface."""

from __future__ import annotations

import os
from pathlib import Path

ONNX_FILE = "model.onnx"
README_FILE = "README.md"
# protobuf cannot hold a message over 2 GiB: larger weights go to a file beside the graph.
_EXTERNAL_DATA_FILE = ONNX_FILE + ".data"
_LARGEST_INLINE_WEIGHTS = 1 << 30

_MISSING_ONNX = "the ONNX export needs the onnx package: pip install 'hf-elmo[export]' (or pip install onnx)"


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError(_MISSING_ONNX) from None
    return onnx


def export_onnx(model_or_path, output_dir: str | os.PathLike, tokenizer=None, overwrite: bool = False) -> Path:
    """Write `output_dir/model.onnx` (the ELMo encoder), the tokenizer files and a README.md of the interface.

    Args:
        model_or_path: an `ElmoModel` (or a task model, whose biLM `.elmo` is exported), or a folder or Hub id
            that `ElmoModel.from_pretrained` loads ("default": the shipped model).
        output_dir: the folder to write; built under a temporary name and renamed when complete.
        tokenizer: the model's `ElmoTokenizer`; by default the one saved with the model.
        overwrite: replace an existing `output_dir`.

    The graph takes `input_ids` (int64, batch x words x max_characters_per_token, the tokenizer's ids),
    `attention_mask` (int64, batch x words) and, for models with a word embedding, `word_ids` (int64, batch x
    words); it returns `layers` (float32, (L+1) x batch x words x 2*projection_dim), the layers of `ElmoModel`'s
    `hidden_states` in the same order, zero at padding. Batch size and sentence length are free.
    Returns the folder written.
    """
    onnx = _import_onnx()
    from ..file_io import AtomicDirectory
    from .onnx_graph import elmo_onnx_model

    target = AtomicDirectory(output_dir, overwrite=overwrite)
    target.check()  # before loading anything
    model, tokenizer, source = _model_and_tokenizer(model_or_path, tokenizer)
    config = model.config
    _check_tokenizer(tokenizer, config)
    from ..embedder import refuse_non_finite_outputs

    refuse_non_finite_outputs(model, tokenizer, source)
    proto = elmo_onnx_model(config, model.state_dict())
    weight_bytes = sum(len(tensor.raw_data) for tensor in proto.graph.initializer)
    with target as folder:
        path = folder / ONNX_FILE
        if weight_bytes > _LARGEST_INLINE_WEIGHTS:
            onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=_EXTERNAL_DATA_FILE, size_threshold=1024)
        else:
            onnx.save_model(proto, path)
        onnx.checker.check_model(str(path))  # by path: also works when the weights lie beside it
        tokenizer.save_pretrained(folder)
        (folder / README_FILE).write_text(interface_readme(config, tokenizer, source), encoding="utf-8")
    return Path(output_dir)


def _model_and_tokenizer(model_or_path, tokenizer):
    from ..modeling_elmo import ElmoModel

    if isinstance(model_or_path, (str, os.PathLike)):
        from ..loading import load_model_and_tokenizer, load_tokenizer

        model, saved_tokenizer, source = load_model_and_tokenizer(os.fspath(model_or_path))
        return model, tokenizer or saved_tokenizer, source
    model = model_or_path
    if not isinstance(model, ElmoModel):
        biLM = getattr(model, "elmo", None)
        if not isinstance(biLM, ElmoModel):
            raise TypeError(f"export_onnx exports an ElmoModel (or a task model's .elmo), got {type(model).__name__}")
        model = biLM
    source = getattr(model, "name_or_path", "") or ""
    if tokenizer is None:
        if not source:
            raise ValueError("this model was not loaded from a folder: pass its tokenizer, "
                             "export_onnx(model, dir, tokenizer=...)")
        from ..loading import load_tokenizer

        tokenizer = load_tokenizer(source, model.config)
    return model, tokenizer, source


def _check_tokenizer(tokenizer, config) -> None:
    """The saved tokenizer must write the ids the graph reads: the fit check every loader runs."""
    from ..loading import check_tokenizer_fits

    check_tokenizer_fits(tokenizer, config)


def interface_readme(config, tokenizer, source: str = "") -> str:
    """The README.md written beside model.onnx: what goes in, what comes out."""
    layers, width = config.num_lstm_layers + 1, 2 * config.projection_dim
    characters = config.max_characters_per_token
    word_input = None
    if config.word_vocab_size:
        word_input = ("| `word_ids` | int64 | batch x words | word ids from `word_vocab.json` (unknown words: "
                      "`<oov>`); ignored at padding |")
    if config.char_scheme == "bytes":
        scheme = (f"UTF-8 bytes: a word is `[259] + [b + 1 for b in word.encode('utf-8')[:{characters - 2}]] + [260]`, "
                  f"padded with 261 to {characters} ids")
    else:
        scheme = (f"characters looked up in `char_vocab.json` (unknown: `<oov>`): a word (cut to {characters - 2} "
                  f"characters) is `[<eow>, characters..., <bow>]` padded with `<pad>` to {characters} ids "
                  "(begin and end swapped, as ELMoForManyLangs wrote them)")
    segmentation = {"jieba": "Chinese is segmented with jieba", "chars": "each Chinese character is a word",
                    "whitespace": "words are split on whitespace only"}.get(getattr(tokenizer, "segmenter", ""), "")
    lines = [
        "# ELMo encoder, ONNX",
        "",
        f"Exported by hf-elmo from `{source}`." if source else "Exported by hf-elmo.",
        "",
        f"`{ONNX_FILE}` (opset 17) computes all {layers} layers of the ELMo biLM for a batch of sentences; it runs",
        "in onnxruntime without PyTorch. The tokenizer files beside it (`tokenizer_config.json` and the",
        "vocabularies) are the ones the model was used with.",
        "",
        "## Inputs",
        "",
        "| name | type | shape | meaning |",
        "| --- | --- | --- | --- |",
        f"| `input_ids` | int64 | batch x words x {characters} | character ids of each word; a padded word position "
        "is all zeros |",
        "| `attention_mask` | int64 | batch x words | 1 at words, 0 at padding; the words of a sentence come first |",
        word_input,
        "",
        "## Output",
        "",
        f"`layers`: float32, {layers} x batch x words x {width}. `layers[0]` is the context-independent token "
        "vector twice, `[token; token]`;",
        f"`layers[j]` for j = 1..{layers - 1} is biLSTM layer j, `[forward_j; backward_j]`. The same layers as "
        "`ElmoModel(...).hidden_states`,",
        "without the sentence boundaries (the model adds `<S>` and `</S>` itself); exactly zero at padding.",
        "The usual ELMo vector of a word is a weighted sum of these layers (e.g. their mean).",
        "",
        "Batch size and sentence length are free. A sentence of zero words gives zeros.",
        "",
        "## Tokenization",
        "",
        f"Character scheme: {scheme}."
        + (f" {segmentation}; punctuation and whitespace separate words." if segmentation else ""),
        "A script that tokenizes and runs this folder with onnxruntime and numpy alone is in hf-elmo's",
        "`docs/deployment.md`.",
        "",
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


__all__ = ["ONNX_FILE", "export_onnx", "interface_readme"]
