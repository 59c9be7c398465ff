"""Sentences in, ELMo vectors out: the everyday Python API.

    >>> import hf_elmo
    >>> embedder = hf_elmo.Embedder()                      # the shipped Chinese model, offline
    >>> vectors = embedder.embed(["我爱北京天安门。", "小米发布了新手机。"])
    >>> vectors[0].shape                                   # (L + 1, words, 2P), like AllenNLP's ElmoEmbedder
    >>> embedder.embed([["小米", "粥"]], layers="top")[0].shape    # pre-split words -> (words, 2P)
    >>> embedder.sentence_vectors(["我爱北京天安门。"]).shape        # masked mean, like TF Hub's `default`

Sentences are sorted by length and run in batches, and results come back in the input order.
`ElmoModel` is stateless (every sentence starts from a zero LSTM state), so a sentence's vectors
do not depend on the batch size or on its neighbours; they agree to float32 rounding (~1e-7),
because matrix products of different shapes may sum in a different order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ..loading import ModelNotFoundError, load_model_and_tokenizer
from ..models.elmo.bilm_elmo import ElmoBiLmMixin, ElmoModelOutput
from ..models.elmo.tokenization_elmo import ElmoTokenizer

#: What `Embedder.embed` and friends take: one raw sentence, raw sentences, or sentences split into words.
Sentences = str | Sequence[str] | Sequence[Sequence[str]]

#: Layer choices for `Embedder.embed`; an `int` picks one layer (0 = character CNN, L = top biLSTM).
LAYER_CHOICES = ("all", "top", "average", "mix")

# Inputs a (possibly extended) ELMo tokenizer may produce that `ElmoModel.forward` accepts.
_MODEL_INPUTS = ("input_ids", "attention_mask", "word_ids")


logger = logging.getLogger(__name__)


def _resolve_device(device) -> torch.device:
    """`None` -> the GPU if there is one, else the CPU; a name or device checked to exist here."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda', 'cuda:N' or 'mps'") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was asked for, but torch sees no CUDA GPU here")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was asked for, but torch sees no Apple GPU here")
    return device


def _resolve_dtype(dtype) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float64": torch.float64}
    if str(dtype) not in names:
        raise ValueError(f"dtype must be one of {sorted(names)} or a torch.dtype, got {dtype!r}")
    return names[str(dtype)]


def check_layers(layers, num_layers: int) -> str | int:
    """Validate a layer choice for a model with `num_layers` = L + 1 output layers."""
    if isinstance(layers, bool) or not isinstance(layers, (str, int)):
        raise TypeError(f"layers must be one of {LAYER_CHOICES} or an int, got {layers!r}")
    if isinstance(layers, str):
        if layers.lstrip("-").isdigit():
            layers = int(layers)
        elif layers not in LAYER_CHOICES:
            raise ValueError(f"layers must be one of {LAYER_CHOICES} or a layer index, got {layers!r}")
    if isinstance(layers, int) and not -num_layers <= layers < num_layers:
        raise ValueError(f"layer index {layers} out of range: this model has layers 0..{num_layers - 1}")
    return layers


class Embedder:
    """Embed sentences with an ELMo model.

    Args:
        model (`str`, `os.PathLike`, [`ElmoModel`] / [`ElmoBiLm`] or `None`):
            Model folder or Hub id; `None` or `"default"` loads `hf_elmo.DEFAULT_MODEL` (the shipped Chinese
            model). A model instance is used itself, not a copy: the embedder puts it in eval mode and
            moves / casts it to `device` / `dtype` when given.
        tokenizer ([`ElmoTokenizer`], *optional*): overrides the tokenizer saved with the model.
        device (`str` or `torch.device`, *optional*): defaults to CUDA when available, else CPU.
        dtype (`torch.dtype` or `str`, *optional*): e.g. `"bfloat16"`; outputs are always float32 numpy
            arrays (or tensors of the model's dtype with `return_tensors="pt"`).
        batch_size (`int`, defaults to 64): sentences per forward pass.
        progress (`bool`, *optional*): show a tqdm bar; by default only for 1,000 or more sentences
            on an interactive terminal.
    """

    def __init__(
        self,
        model: str | os.PathLike | ElmoBiLmMixin | None = None,
        tokenizer: ElmoTokenizer | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        batch_size: int = 64,
        progress: bool | None = None,
    ):
        if isinstance(model, ElmoBiLmMixin):  # an `ElmoModel`, or the `ElmoBiLm` the commands load
            elmo, self.name = model, getattr(model, "name_or_path", "") or f"<{type(model).__name__}>"
            default_tokenizer = None
        else:
            elmo, default_tokenizer, self.name = load_model_and_tokenizer(model)
        self.tokenizer = tokenizer or default_tokenizer or ElmoTokenizer(
            max_characters_per_token=elmo.config.max_characters_per_token
        )
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        device = _resolve_device(device)
        self.model = elmo.to(device=device, dtype=_resolve_dtype(dtype)).eval()
        self.batch_size = int(batch_size)
        self.progress = progress

    @property
    def config(self):
        return self.model.config

    @property
    def num_layers(self) -> int:
        """Output layers L + 1: the character CNN layer and each biLSTM layer."""
        return self.config.num_lstm_layers + 1

    @property
    def dim(self) -> int:
        """Width 2P of every layer (forward and backward side by side)."""
        return 2 * self.config.projection_dim

    # sentences -> words ----------------------------------------------------------------------

    def tokenize(self, sentences: Sentences) -> list[list[str]] | list[str]:
        """The words the vectors of `embed(sentences)` belong to, in the same shape: one word list per sentence
        (raw strings go through the tokenizer, word lists pass through), a single word list for a single string."""
        words, single = self._as_word_lists(sentences)
        return words[0] if single else words

    def _as_word_lists(self, sentences: Sentences, return_tensors: str = "pt") -> tuple[list[list[str]], bool]:
        """(one word list per sentence, whether `sentences` was a single string); checks `return_tensors` too,
        so that a bad choice fails before any work."""
        if return_tensors not in ("np", "pt"):
            raise ValueError(f"return_tensors must be 'np' or 'pt', got {return_tensors!r}")
        if isinstance(sentences, str):
            return [self.tokenizer.tokenize(sentences)], True
        if not isinstance(sentences, (list, tuple)):
            raise TypeError(
                "sentences must be a string, a list of strings (raw sentences) or a list of word lists, "
                f"got {type(sentences).__name__}"
            )
        word_lists = []
        for index, sentence in enumerate(sentences):
            if isinstance(sentence, str):
                word_lists.append(self.tokenizer.tokenize(sentence))
            elif isinstance(sentence, (list, tuple)) and all(isinstance(word, str) for word in sentence):
                word_lists.append(list(sentence))
            else:
                raise TypeError(f"sentence {index} must be a string or a list of words (strings), got {sentence!r:.60}")
        return word_lists, False

    # the batched forward pass -----------------------------------------------------------------

    def iter_batches(
        self, word_lists: Sequence[Sequence[str]], batch_size: int | None = None, progress: bool | None = None
    ) -> Iterator[tuple[list[int], ElmoModelOutput]]:
        """Run the model over sentences sorted by length; yields (input indices, model output) per batch.

        Row r of every output tensor belongs to `word_lists[indices[r]]`; rows are zero past each length.
        """
        from tqdm.auto import tqdm

        batch_size = self.batch_size if batch_size is None else int(batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        order = sorted(range(len(word_lists)), key=lambda i: -len(word_lists[i]))
        progress = self.progress if progress is None else progress
        disable = (None if len(word_lists) >= 1000 else True) if progress is None else not progress
        device = self.model.device
        with tqdm(total=len(word_lists), unit="sent", disable=disable, leave=False) as bar:
            for start in range(0, len(order), batch_size):
                indices = order[start : start + batch_size]
                encoding = self.tokenizer(
                    [list(word_lists[i]) for i in indices], is_split_into_words=True, padding=True, return_tensors="pt"
                )
                inputs = {key: encoding[key].to(device) for key in _MODEL_INPUTS if key in encoding}
                if inputs["input_ids"].shape[1] == 0:  # every sentence in the batch is empty
                    inputs = {key: value.new_zeros((len(indices), 1) + tuple(value.shape[2:])) for key, value in inputs.items()}
                with torch.inference_mode():
                    output = self.model(**inputs)
                yield indices, output
                bar.update(len(indices))

    def _select(self, output: ElmoModelOutput, layers) -> torch.Tensor:
        """(B, L+1, W, 2P) for "all", else (B, W, 2P)."""
        if layers == "all":
            return torch.stack(output.hidden_states, dim=1)
        if layers == "top":
            return output.hidden_states[-1]
        if layers == "average":
            return torch.stack(output.hidden_states).mean(dim=0)
        if layers == "mix":
            if not output.elmo_representations:
                raise ValueError("this model has no learned mix (config.num_output_representations == 0)")
            return output.elmo_representations[0]
        return output.hidden_states[layers]

    def iter_embed(
        self, word_lists: Sequence[Sequence[str]], layers="all", batch_size: int | None = None, progress=None
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yield (input index, vectors) in batch order; vectors are CPU tensors as `embed` describes."""
        layers = check_layers(layers, self.num_layers)
        for indices, output in self.iter_batches(word_lists, batch_size, progress):
            selected = self._select(output, layers).cpu()
            for row, index in enumerate(indices):
                length = len(word_lists[index])
                vectors = selected[row, :, :length] if layers == "all" else selected[row, :length]
                yield index, vectors.clone()

    # public API -----------------------------------------------------------------------------

    def embed(self, sentences: Sentences, layers: str | int = "all", return_tensors: str = "np",
            batch_size: int | None = None, progress: bool | None = None):
        """Contextual word vectors for each sentence.

        Args:
            sentences: a raw string (one sentence), a list of raw strings, or a list of word lists.
            layers: `"all"` -> `(L + 1, words, 2P)` per sentence (AllenNLP `ElmoEmbedder` layout: layer 0 is
                `[token; token]`, layer j the j-th biLSTM layer); `"top"`, `"average"` (mean of the L + 1 layers),
                `"mix"` (the model's learned scalar mix) or an int layer index -> `(words, 2P)`.
            return_tensors: `"np"` (float32 numpy arrays) or `"pt"` (CPU torch tensors).

        Returns:
            A list with one array per sentence, in input order (a single array for a single string).
        """
        word_lists, single = self._as_word_lists(sentences, return_tensors)
        results: list = [None] * len(word_lists)
        for index, vectors in self.iter_embed(word_lists, layers, batch_size, progress):
            results[index] = vectors.float().numpy() if return_tensors == "np" else vectors
        return results[0] if single else results

    def sentence_vectors(self, sentences: Sentences, layers: str | int = "average", return_tensors: str = "np",
            batch_size: int | None = None, progress: bool | None = None):
        """Mean of each sentence's word vectors over its real words (TF Hub's `default` output is this
        over the learned mix: `layers="mix"`).

        Returns an array `(sentences, 2P)` (`(sentences, L + 1, 2P)` for `layers="all"`); a sentence with
        no words gets zeros. A single string gives one vector.
        """
        layers = check_layers(layers, self.num_layers)
        word_lists, single = self._as_word_lists(sentences, return_tensors)
        shape = (len(word_lists),) + ((self.num_layers,) if layers == "all" else ()) + (self.dim,)
        result = torch.zeros(shape, dtype=self.model.dtype)
        for indices, output in self.iter_batches(word_lists, batch_size, progress):
            selected = self._select(output, layers)
            mask = output.mask.to(selected.dtype)
            if layers == "all":
                mask = mask.unsqueeze(1)
            counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
            means = (selected * mask.unsqueeze(-1)).sum(dim=-2) / counts
            result[indices] = means.cpu()
        if return_tensors == "np":
            result = result.float().numpy()
        return result[0] if single else result

    def encode(self, sentences: Sentences, batch_size: int = 32, **kwargs) -> np.ndarray:
        """`sentence_vectors(sentences)` at its defaults, with the signature MTEB-style evaluators call: an array
        `(sentences, 2P)`. `show_progress_bar` and `normalize_embeddings` (unit length) are honoured; the other
        keyword arguments such evaluators pass (`task_name`, `prompt_type`, `convert_to_numpy`, ...) are accepted and
        do not change the vectors: ELMo has no prompts."""
        if not isinstance(sentences, (str, list, tuple)):
            sentences = list(sentences)  # a datasets column or another iterable of texts
        vectors = self.sentence_vectors(sentences, batch_size=batch_size, progress=kwargs.get("show_progress_bar"))
        if kwargs.get("normalize_embeddings"):
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), np.finfo(vectors.dtype).tiny)
        return vectors

    def sents2elmo(self, sents: Sequence[Sequence[str]], output_layer: int = -1) -> list[np.ndarray]:
        """ELMoForManyLangs' call: pre-segmented sentences -> numpy arrays per sentence.

        `output_layer`: 0 = character layer `[token; token]`, 1..L = biLSTM layers, -1 = average of all
        L + 1 layers `(words, 2P)`, -2 = all layers `(L + 1, words, 2P)`.
        """
        if output_layer == -1:
            layers = "average"
        elif output_layer == -2:
            layers = "all"
        elif isinstance(output_layer, int) and 0 <= output_layer < self.num_layers:
            layers = output_layer
        else:
            raise ValueError(f"output_layer must be -2, -1 or 0..{self.num_layers - 1}, got {output_layer!r}")
        if isinstance(sents, str) or any(isinstance(words, str) for words in sents):
            raise TypeError(
                "sents2elmo takes pre-segmented sentences (lists of words), as ELMoForManyLangs does, and a string "
                "would be read character by character; pass word lists, or raw text to `embed`"
            )
        return self.embed([list(words) for words in sents], layers=layers)


# Words that reach every part of a probe run: Latin letters, a digit, CJK characters, punctuation.
_PROBE_WORDS = ["the", "cat", "7", "小米", "粥", "。"]


def refuse_non_finite_outputs(model: torch.nn.Module, tokenizer, source: str = "") -> None:
    """ValueError, before anything is written, when the model's layers for a probe sentence hold values that are
    not finite (NaN or infinity; e.g. weights that are finite but so large that their products overflow float32),
    with the count: an export of such a model would serve NaN vectors. The weights' own check covers only the
    weights."""
    encoding = tokenizer([_PROBE_WORDS], is_split_into_words=True, padding=True, return_tensors="pt")
    inputs = {name: value for name, value in encoding.items() if name in _MODEL_INPUTS}
    biLM = model.base_model  # a task model's head reads these layers (a character tagger also needs characters)
    training = biLM.training
    biLM.eval()
    try:
        with torch.no_grad():
            layers = torch.stack(biLM(**inputs, output_hidden_states=True).hidden_states)
    finally:
        biLM.train(training)
    bad = int((~torch.isfinite(layers)).sum())
    if bad:
        name = f"{source}: " if source else ""
        raise ValueError(
            f"{name}the model's outputs are not finite: {bad:,} of the {layers.numel():,} values of its layers for a "
            "probe sentence are NaN or infinite (weights too large for float32?); nothing was written"
        )


__all__ = ["Embedder", "ModelNotFoundError", "load_model_and_tokenizer", "LAYER_CHOICES", "check_layers",
           "refuse_non_finite_outputs"]
