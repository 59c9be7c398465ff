"""An hf-elmo model as a sentence-transformers model folder.

    >>> from hf_elmo.integrations.sentence_transformers import save_sentence_transformer
    >>> save_sentence_transformer("default", "elmo-zh-sentences")          # the shipped Chinese model
    >>> from sentence_transformers import SentenceTransformer
    >>> SentenceTransformer("elmo-zh-sentences", trust_remote_code=True).encode(["小米发布了新款手机。"]).shape

The folder holds the ELMo model and tokenizer as `save_pretrained` writes them (with the modelling files, so they
load as transformers remote code), `elmo_sentence_encoder.py` (the first sentence-transformers module, which
turns texts into word vectors) and a `Pooling` module. Loading it needs sentence-transformers, torch, transformers
and jieba, not hf-elmo. At the defaults, `encode(texts)` equals `hf_elmo.Embedder(model).sentence_vectors(texts)`:
the mean over each text's words of the average of the L + 1 layers.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..utils.transformers_versions import require_transformers_5

# sentence-transformers 6 (whose module API elmo_sentence_encoder.py implements) requires transformers 5.
require_transformers_5("hf_elmo.integrations.sentence_transformers (sentence-transformers 6)", ImportError)

from . import elmo_sentence_encoder  # noqa: E402
from .elmo_sentence_encoder import DEFAULT_LAYERS, ElmoWordEmbeddings, check_layers  # noqa: E402

#: Poolings that make sense over ELMo's words: the mean (`Embedder.sentence_vectors`' pooling) and the maximum.
POOLING_MODES = ("mean", "max")
DEFAULT_POOLING = "mean"

INSTALL_HINT = 'pip install -e ".[sentence-transformers]" (in a clone of hf-elmo)'
_MODULE_FILE = Path(elmo_sentence_encoder.__file__).name
# How modules.json names the first module where hf-elmo is not installed: the file saved beside the weights.
_MODULE_REFERENCE = f"{Path(_MODULE_FILE).stem}.{ElmoWordEmbeddings.__name__}"


def import_sentence_transformers():
    try:
        import sentence_transformers
    except ImportError:
        raise ImportError(f"this needs the sentence-transformers package: {INSTALL_HINT}") from None
    return sentence_transformers


def save_sentence_transformer(model_path: str | os.PathLike, output_dir: str | os.PathLike,
                              layers: str | int = DEFAULT_LAYERS, pooling: str = DEFAULT_POOLING,
                              overwrite: bool = False) -> Path:
    """Write `output_dir`, a folder that `SentenceTransformer(output_dir, trust_remote_code=True)` loads.

    Args:
        model_path: an hf-elmo model folder or Hub id; `"default"` is the model shipped with hf-elmo.
        output_dir: the folder to write; built under a temporary name and renamed when complete.
        layers: the word vectors pooled: `"average"` (default, the mean of the L + 1 layers), `"top"`, `"mix"`
            (the model's learned scalar mix) or a layer index, as `hf_elmo.Embedder` names them.
        pooling: `"mean"` (default; over each text's words, as `Embedder.sentence_vectors`) or `"max"`.
        overwrite: replace an existing `output_dir`.

    Returns the folder written.
    """
    sentence_transformers = import_sentence_transformers()
    from sentence_transformers.sentence_transformer.modules import Pooling

    from ..loading import load_model_and_tokenizer
    from ..utils.io import AtomicDirectory

    if pooling not in POOLING_MODES:
        raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
    target = AtomicDirectory(output_dir, overwrite=overwrite)
    target.check()  # before loading anything
    model, tokenizer, source = load_model_and_tokenizer(model_path)
    layers = check_layers(layers, model.config.num_lstm_layers + 1)
    from .embedder import refuse_non_finite_outputs

    refuse_non_finite_outputs(model, tokenizer, source)
    words = ElmoWordEmbeddings(model.cpu().eval(), tokenizer, layers=layers)
    sentence_model = sentence_transformers.SentenceTransformer(
        modules=[words, Pooling(words.get_embedding_dimension(), pooling_mode=pooling)], device="cpu"
    )
    with target as folder:
        sentence_model.save(str(folder), create_model_card=False)
        (folder / "README.md").write_text(model_card(source, model.config, layers, pooling), encoding="utf-8")
        modules_file = folder / "modules.json"
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        modules[0]["type"] = _MODULE_REFERENCE
        modules_file.write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
        shutil.copyfile(elmo_sentence_encoder.__file__, folder / _MODULE_FILE)
    return Path(output_dir)


def _layers_in_words(layers: str | int, num_layers: int) -> str:
    if layers == "average":
        return f"the average of its {num_layers} layers (character CNN and biLSTM layers)"
    if layers == "top":
        return "the top biLSTM layer"
    if layers == "mix":
        return "the model's learned scalar mix of its layers"
    return f"layer {layers} (0 = character CNN, 1..{num_layers - 1} = biLSTM layers, negative from the top)"


def model_card(source: str, config, layers: str | int, pooling: str) -> str:
    """The README.md of the folder: what the vectors are and how to load them."""
    name = Path(source).name if os.path.isdir(source) else source
    num_layers, width = config.num_lstm_layers + 1, 2 * config.projection_dim
    return f"""---
library_name: sentence-transformers
pipeline_tag: sentence-similarity
tags:
- sentence-transformers
- feature-extraction
- elmo
---

# ELMo sentence vectors from {name}

ELMo (Peters et al., 2018) as a sentence-transformers model, written by hf-elmo's `save_sentence_transformer`
from `{name}`. A text is split into words by the model's tokenizer (`ElmoTokenizer`; jieba for Chinese); each
word's vector is {_layers_in_words(layers, num_layers)}, and the text's vector is the {pooling} of its words'
vectors: {width} dimensions. A text without words gets a zero vector (with mean pooling).

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("path/to/this/folder", trust_remote_code=True)
vectors = model.encode(["小米发布了新款手机。", "妈妈用小米和红枣煮了一锅粥。"])   # (texts, {width})
```

`trust_remote_code=True` runs `elmo_sentence_encoder.py` (texts to word vectors) and the ELMo modelling files
beside the weights. It needs sentence-transformers, torch, transformers and jieba; hf-elmo itself is not needed.
With hf-elmo, `hf_elmo.Embedder(folder).sentence_vectors(texts, layers={layers!r})` gives the same vectors (mean
pooling).
"""


__all__ = ["DEFAULT_LAYERS", "DEFAULT_POOLING", "POOLING_MODES", "ElmoWordEmbeddings", "save_sentence_transformer"]
