"""`hf-elmo info`: a model's size, layers, dimensions and vocabulary."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..utils.io import human_size
from .common import add_model_arguments, check_model_folder, make_embedder

# A local folder's encoder loads as an ElmoBiLm (`common.make_embedder`); the loading registers the ELMo Auto classes
# only where AutoTokenizer is needed (`loading.load_tokenizer`).
REGISTERS_AUTO_CLASSES_ITSELF = True

HELP = "show a model's size, layers, dimensions and vocabulary"
DESCRIPTION = "Show a model's size, parameters, layers, dimensions and vocabulary."


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_model_arguments(parser, batch=False)
    parser.set_defaults(batch_size=1)


def model_info(embedder) -> dict:
    model, config = embedder.model, embedder.config
    folder = embedder.name if os.path.isdir(str(embedder.name)) else None
    size = sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file()) if folder else None
    tokenizer = embedder.tokenizer
    lm_vocab = getattr(config, "lm_vocab_size", 0) or 0
    return {
        "model": str(embedder.name),
        "size_on_disk_bytes": size,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "dtype": str(model.dtype).removeprefix("torch."),
        "output_layers": embedder.num_layers,
        "layer_dim": embedder.dim,
        "lstm_layers": config.num_lstm_layers,
        "lstm_cell_dim": config.lstm_cell_dim,
        "projection_dim": config.projection_dim,
        "char_cnn_filters": config.char_cnn_filters,
        "highway_layers": config.num_highway_layers,
        "max_characters_per_token": config.max_characters_per_token,
        "character_vocabulary": config.char_vocab_size,
        "character_scheme": getattr(config, "char_scheme", "bytes"),
        "word_vocabulary": getattr(config, "word_vocab_size", 0) or 0,
        "lm_output_vocabulary": int(lm_vocab),
        "segmenter": getattr(tokenizer, "segmenter", None),  # how raw text becomes words: jieba, chars or whitespace
    }


_SEGMENTATION = {
    "jieba": " (punctuation apart, Chinese cut into jieba words)",
    "chars": " (punctuation apart, one word per Chinese character)",
    "whitespace": " (words are what spaces separate, as in bilm-tf / AllenNLP training text)",
}


def check(args) -> None:
    check_model_folder(args.model)


def run(args) -> int:
    info = model_info(make_embedder(args))
    if args.json:
        print(json.dumps(info, ensure_ascii=False, indent=1))
        return 0
    size = info["size_on_disk_bytes"]
    filters = ", ".join(f"{count}x{width}" for width, count in info["char_cnn_filters"])
    words = f"{info['word_vocabulary']:,} words (word embedding)" if info["word_vocabulary"] else "none: words are spelled from characters, any word works"
    print(f"model:        {info['model']}" + (f"  ({human_size(size)} on disk)" if size is not None else ""))
    print(f"parameters:   {info['parameters']:,} ({info['dtype']})")
    print(f"layers:       {info['output_layers']} outputs (character CNN + {info['lstm_layers']} biLSTM), each {info['layer_dim']}-dim")
    print(f"biLSTM:       cell {info['lstm_cell_dim']}, projection {info['projection_dim']} per direction")
    print(f"char CNN:     filters {filters}; {info['highway_layers']} highway; {info['max_characters_per_token']} chars/word")
    print(f"characters:   {info['character_vocabulary']} ids ({info['character_scheme']} scheme)")
    print(f"word vocab:   {words}")
    if info["lm_output_vocabulary"]:
        print(f"LM softmax:   {info['lm_output_vocabulary']:,} words (pretraining head)")
    print(f"segmentation: {info['segmenter']}" + _SEGMENTATION.get(info["segmenter"], ""))
    return 0
