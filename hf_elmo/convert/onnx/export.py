"""`export_onnx`: an ELMo encoder -> a folder with `model.onnx`, the tokenizer files and a README of the interface."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .client import CLIENT_CONFIG, CLIENT_FILE

ONNX_FILE = "model.onnx"
# What marks a folder as an earlier export, which --overwrite may replace.
EXPORT_MARKERS = ("config.json", "options.json", ONNX_FILE, CLIENT_CONFIG)
README_FILE = "README.md"
# protobuf cannot hold a message over 2 GiB: larger weights go to a file beside the graph.
_EXTERNAL_DATA_FILE = ONNX_FILE + ".data"
_LARGEST_INLINE_WEIGHTS = 1 << 30

_MISSING_ONNX = ("the ONNX export needs the onnx package: pip install -e \".[export]\" in a clone of hf-elmo (or pip "
                 "install onnx onnxruntime)")


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError(_MISSING_ONNX) from None
    return onnx


def export_onnx(model_or_path, output_dir: str | os.PathLike, tokenizer=None, overwrite: bool = False) -> Path:
    """Write `output_dir/model.onnx` (the whole model: the biLM and its task head), the tokenizer files, the client
    (`elmo_client.py` and `client.json`: numpy and onnxruntime only) and a README.md of the interface.

    Args:
        model_or_path: an `ElmoModel`, `ElmoForTokenClassification`, `ElmoForCharacterTagging` or
            `ElmoForSequenceClassification` (an `ElmoForPreTraining` exports its biLM: the language-model softmax is
            its training objective), or a folder or Hub id holding one ("default": the shipped model).
        output_dir: the folder to write; built under a temporary name and renamed when complete.
        tokenizer: the model's `ElmoTokenizer`; by default the one saved with the model.
        overwrite: replace an existing `output_dir` (an earlier export, or another hf-elmo output folder).

    The graph takes `input_ids` (int64, batch x words x max_characters_per_token, the tokenizer's ids),
    `attention_mask` (int64, batch x words) and, for models with a word embedding, `word_ids` (int64, batch x
    words); a character tagger also `token_word_index` and `token_positions` (batch x characters) [and
    `character_input_ids`]. It returns `layers` (float32, (L+1) x batch x words x 2*projection_dim, `ElmoModel`'s
    `hidden_states`, zero at padding) and, per kind, `mixes` (an encoder's learned mixes) or `logits` (tag scores,
    or class scores). A model with a part the exporter does not know is refused, naming it, before anything is
    written. Returns the folder written.
    """
    onnx = _import_onnx()
    from ...utils.io import AtomicDirectory
    from .client_config import client_config
    from .heads import task_onnx_model

    target = AtomicDirectory(output_dir, overwrite=overwrite, markers=EXPORT_MARKERS)
    target.check()  # before loading anything
    model, tokenizer, source, kind = _model_and_tokenizer(model_or_path, tokenizer)
    config = model.config
    _check_tokenizer(tokenizer, config)
    from ...integrations.embedder import refuse_non_finite_outputs

    refuse_non_finite_outputs(model, tokenizer, source)
    what = f"{type(model).__name__}" + (f" {source}" if source else "")
    proto, head = task_onnx_model(kind, config, model.state_dict(), what)
    weight_bytes = sum(len(tensor.raw_data) for tensor in proto.graph.initializer)
    settings = client_config(kind, config, tokenizer, head, source)
    with target as folder:
        path = folder / ONNX_FILE
        if weight_bytes > _LARGEST_INLINE_WEIGHTS:
            onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=_EXTERNAL_DATA_FILE, size_threshold=1024)
        else:
            onnx.save_model(proto, path)
        onnx.checker.check_model(str(path))  # by path: also works when the weights lie beside it
        tokenizer.save_pretrained(folder)
        (folder / CLIENT_CONFIG).write_text(json.dumps(settings, ensure_ascii=False) + "\n", encoding="utf-8")
        shutil.copyfile(Path(__file__).with_name("client.py"), folder / CLIENT_FILE)
        (folder / README_FILE).write_text(interface_readme(config, tokenizer, source, kind), encoding="utf-8")
    return Path(output_dir)


def _architecture_class(name: str):
    """The model class a folder's config.json names (ElmoModel when it names none); ExportRefused for another."""
    from ...finetuning.run import model_config_dict
    from .heads import KINDS, ExportRefused

    architectures = model_config_dict(name).get("architectures") or ["ElmoModel"]
    known = [architecture for architecture in architectures if architecture in KINDS]
    if not known:
        raise ExportRefused(f"cannot export {name} to ONNX: its config.json names {', '.join(architectures)}, which "
                            f"the exporter does not know ({', '.join(KINDS)})")
    from ...models.elmo import modeling_elmo

    return getattr(modeling_elmo, "ElmoModel" if known[0] == "ElmoForPreTraining" else known[0])  # its encoder


def _model_and_tokenizer(model_or_path, tokenizer):
    from ...models.elmo.modeling_elmo import ElmoModel
    from .heads import KINDS, ExportRefused

    if isinstance(model_or_path, (str, os.PathLike)):
        from ...loading import load_model_and_tokenizer, resolve_model_name

        name = resolve_model_name(os.fspath(model_or_path))
        model_class = _architecture_class(name)
        model, saved_tokenizer, source = load_model_and_tokenizer(name, model_class=model_class)
        return model, tokenizer or saved_tokenizer, source, KINDS[type(model).__name__]
    model = model_or_path
    kind = KINDS.get(type(model).__name__)
    if type(model).__name__ == "ElmoForPreTraining":
        model = model.elmo
    elif kind is None:
        if isinstance(getattr(model, "elmo", None), ElmoModel):
            raise ExportRefused(f"cannot export {type(model).__name__} to ONNX: the exporter does not know its head "
                                f"(it writes {', '.join(KINDS)}); export_onnx(model.elmo, ...) exports its biLM alone")
        raise TypeError(f"export_onnx exports an hf-elmo model ({', '.join(KINDS)}), got {type(model).__name__}")
    source = getattr(model, "name_or_path", "") or ""
    if tokenizer is None:
        if not source:
            raise ValueError("this model was not loaded from a folder: pass its tokenizer, "
                             "export_onnx(model, dir, tokenizer=...)")
        from ...loading import load_tokenizer

        tokenizer = load_tokenizer(source, model.config)
    return model, tokenizer, source, kind


def _check_tokenizer(tokenizer, config) -> None:
    """The saved tokenizer must write the ids the graph reads: the fit check every loader runs."""
    from ...loading import check_tokenizer_fits

    check_tokenizer_fits(tokenizer, config)


_KIND_OUTPUTS = {
    "encoder": "`mixes`: float32, batch x mixes x words x {width}: the model's learned mixes "
               "(`ElmoModelOutput.mixes`), `gamma * sum_j softmax(w)_j * layers[j]`.",
    "token-classification": "`logits`: float32, batch x words x {labels}: the tag scores of each word. {crf}",
    "character-tagging": "`logits`: float32, batch x characters x {labels}: the tag scores of each character (the "
                         "characters of the words, in order; inputs `token_word_index`, each character's word, -1 at "
                         "padding, and `token_positions`, its place in the word: 0 alone, 1 first, 2 inside, 3 "
                         "last). {crf}",
    "sequence-classification": "`logits`: float32, batch x {labels}: the class scores of each sentence (softmax for "
                               "probabilities).",
}


def interface_readme(config, tokenizer, source: str = "", kind: str = "encoder") -> str:
    """The README.md written beside model.onnx: what goes in, what comes out, and the client."""
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
    crf = ("A CRF scores tag sequences: its start, end and transition scores are in `client.json` (`crf`), and "
           "the client decodes with Viterbi." if getattr(config, "use_crf", False) else "The best tag is the argmax.")
    head = _KIND_OUTPUTS[kind].format(width=width, labels=config.num_labels, crf=crf)
    client = {"encoder": "client.sentence_vectors([\"first text\", \"second text\"])   # (texts, "
                         f"{width}) numpy",
              "sequence-classification": "client.predict([\"first text\"])   # [{label, score, scores, words}]"}.get(
        kind, "client.predict([\"first text\"])   # [{words, offsets, tags, entities: [{entity, word, start, end, "
              "score}]}]")
    lines = [
        f"# ELMo {kind}, ONNX",
        "",
        f"Exported by hf-elmo from `{source}`." if source else "Exported by hf-elmo.",
        "",
        "## Use it without PyTorch",
        "",
        "`elmo_client.py` beside this file needs numpy and onnxruntime"
        + (" (and jieba, which segments this model's Chinese)" if getattr(tokenizer, "segmenter", "") == "jieba"
           else "") + "; it tokenizes exactly as hf-elmo's",
        "`ElmoTokenizer` (the rules are in `client.json`) and gives each word's offsets in the text:",
        "",
        "```python",
        "import sys; sys.path.insert(0, \"PATH/TO/THIS/FOLDER\")",
        "from elmo_client import ElmoClient",
        "client = ElmoClient(\"PATH/TO/THIS/FOLDER\")",
        client,
        "```",
        "",
        f"`{ONNX_FILE}` (opset 17) computes the whole model for a batch of sentences. The tokenizer files beside it",
        "(`tokenizer_config.json` and the vocabularies) are the ones the model was used with.",
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
        "## Outputs",
        "",
        f"`layers`: float32, {layers} x batch x words x {width}. `layers[0]` is the context-independent token "
        "vector twice, `[token; token]`;",
        f"`layers[j]` for j = 1..{layers - 1} is biLSTM layer j, `[forward_j; backward_j]`. The same layers as "
        "`ElmoModel(...).hidden_states`,",
        "without the sentence boundaries (the model adds `<S>` and `</S>` itself); exactly zero at padding.",
        "",
        head,
        "",
        "Batch size and sentence length are free. A sentence of zero words gives zeros.",
        "",
        "## Tokenization",
        "",
        f"Character scheme: {scheme}."
        + (f" {segmentation}; punctuation and whitespace separate words." if segmentation else ""),
        "",
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"


__all__ = ["EXPORT_MARKERS", "ONNX_FILE", "export_onnx", "interface_readme"]
