"""ELMo word vectors for flair: a `TokenEmbeddings` for flair's taggers and classifiers.

    >>> from flair.data import Sentence
    >>> from hf_elmo.integrations.flair import ElmoTokenEmbeddings
    >>> embeddings = ElmoTokenEmbeddings("default", layers="average")   # the shipped Chinese model, offline
    >>> sentence = Sentence(["小米", "发布", "了", "新", "手机"])
    >>> embeddings.embed(sentence)
    >>> sentence[0].embedding.shape                                       # (2P,)

Each flair `Token` gets its ELMo vector in its sentence, the same vector `hf_elmo.Embedder(model).embed(words,
layers=...)` gives the word (to float32 rounding: batches may differ). ELMo stays fixed, as in the paper's taggers:
the vectors of a sentence are the same in every epoch (`static_embeddings`), and a `SequenceTagger` trains only its
own layers on top of them (with `reproject_embeddings`, a learned linear map of them).

Saved with the tagger is where the model comes from (its folder, resolved to an absolute path, or its Hub id) and
the options, never the ELMo weights: `SequenceTagger.load` loads the model again from there, so the tagger file
stays small and the weights come from their own safetensors file. `import hf_elmo.integrations.flair` before
`SequenceTagger.load`, so that flair knows the embedding's class.
"""

from __future__ import annotations

import os
from typing import Any

try:
    import flair
    from flair.embeddings import TokenEmbeddings
    from flair.embeddings.base import register_embeddings
except ImportError:
    raise ImportError('hf_elmo.integrations.flair needs the flair package: pip install -e ".[flair]" (in a clone of '
                      "hf-elmo)") from None

from ..loading import resolve_model_name
from .embedder import LAYER_CHOICES, Embedder, check_layers

INSTALL_HINT = 'pip install -e ".[flair]" (in a clone of hf-elmo)'


def _model_source(model: str | os.PathLike) -> str:
    """What the saved tagger names: 'default', a Hub id, or a local folder as an absolute path (so that the tagger
    loads from any working directory)."""
    name = os.fspath(model)
    if name != "default" and os.path.isdir(name):
        return os.path.abspath(name)
    return name


@register_embeddings
class ElmoTokenEmbeddings(TokenEmbeddings):
    """Contextual ELMo vectors for flair tokens.

    Args:
        model: an hf-elmo model folder or Hub id; `"default"` (the default) is the Chinese model shipped with hf-elmo.
        layers: which vector a token gets, as `hf_elmo.Embedder` names them: `"all"` (default: the L + 1 layers
            concatenated, (L + 1) x 2P values, as flair's `ELMoEmbeddings` did), `"top"`, `"average"` (the mean of the
            L + 1 layers), `"mix"` (the model's learned scalar mix) or a layer index (0 = character CNN).
        batch_size: sentences per forward pass of the ELMo model.
        lstm_implementation: how the model computes (a name in `hf_elmo.models.elmo.bilm_elmo.ElmoKernelInterface`;
            "auto" runs hf-elmo's CPU kernels). Not a property of the vectors beyond float32 rounding, and saved with the tagger.
        name: the key of the vectors in each token's embeddings (default `elmo-<model>-<layers>`).

    The model runs on `flair.device`; its weights are neither trained nor saved in the tagger's file.
    """

    def __init__(self, model: str | os.PathLike = "default", layers: str | int = "all", batch_size: int = 32,
                 lstm_implementation: str = "auto", name: str | None = None):
        self.model_source = _model_source(model)
        self.instance_parameters = {"model": self.model_source, "layers": layers, "batch_size": int(batch_size),
                                    "lstm_implementation": lstm_implementation, "name": name}
        self.name = name or f"elmo-{os.path.basename(self.model_source.rstrip('/')) or self.model_source}-{layers}"
        self.static_embeddings = True  # ELMo is fixed: a sentence's vectors never change
        super().__init__()
        self._load()

    def _load(self) -> None:
        """Load the model from its source: kept out of the module's parameters (and so of flair's state_dict)."""
        params = self.instance_parameters
        embedder = Embedder(resolve_model_name(params["model"]), device=flair.device, batch_size=params["batch_size"])
        embedder.model.set_lstm_implementation(params["lstm_implementation"])
        self.layers = check_layers(params["layers"], embedder.num_layers)
        if self.layers == "mix" and not embedder.config.num_output_representations:
            raise ValueError("layers='mix' needs a learned mix, but this model has none "
                             "(config.num_output_representations == 0)")
        for parameter in embedder.model.parameters():
            parameter.requires_grad_(False)
        # A plain attribute, not a submodule: the weights stay out of state_dict() and of the tagger's file.
        self.__dict__["embedder"] = embedder

    @property
    def embedding_length(self) -> int:
        embedder = self.embedder
        return embedder.dim * (embedder.num_layers if self.layers == "all" else 1)

    def _add_embeddings_internal(self, sentences: list[flair.data.Sentence]) -> list[flair.data.Sentence]:
        embedder = self.embedder
        if embedder.model.device != flair.device:  # flair moves the tagger; the model is not one of its modules
            embedder.model.to(flair.device)
        word_lists = [[token.text for token in sentence.tokens] for sentence in sentences]
        for indices, output in embedder.iter_batches(word_lists, progress=False):
            selected = embedder._select(output, self.layers)
            for row, index in enumerate(indices):
                length = len(word_lists[index])
                if self.layers == "all":  # (L + 1, words, 2P) -> (words, (L + 1) x 2P)
                    vectors = selected[row, :, :length].transpose(0, 1).reshape(length, self.embedding_length)
                else:
                    vectors = selected[row, :length]
                vectors = vectors.clone()  # out of inference mode: the tagger's layers keep them for backward
                for token, vector in zip(sentences[index].tokens, vectors):
                    token.set_embedding(self.name, vector)
        return sentences

    def extra_repr(self) -> str:
        return f"model={self.model_source!r}, layers={self.layers!r}"

    # flair saves `to_params()` in the tagger's file and calls `from_params` on load (`save_embeddings` /
    # `load_embeddings`); pickling (older flair, copies) keeps the same parameters and loads the model again.
    def to_params(self) -> dict[str, Any]:
        return dict(self.instance_parameters)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ElmoTokenEmbeddings:
        return cls(**params)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("embedder", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._load()


__all__ = ["ElmoTokenEmbeddings", "INSTALL_HINT", "LAYER_CHOICES"]
