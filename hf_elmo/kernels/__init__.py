"""hf-elmo's fast kernels for the plain PyTorch model of `modeling_elmo.py` (package only, never remote code).

A model holds an `ElmoKernels` when it runs on them (`from_pretrained(..., lstm_implementation=...)`,
`model.set_lstm_implementation(...)`; "auto" is the default where hf-elmo is installed):

- layer 0: each distinct token encoded once, the padding tail cut, convolutions as products on oneDNN
  (character_encoder.py), optionally a token cache (`build_token_cache`, token_cache.py);
- the biLSTM: a batch-major recurrence with a hand-written backward, oneDNN's packed per-step products for CPU
  float32 inference, int8 weights on request (bilstm.py, lstm_recurrence.py, matrix_products.py, quantization.py);
- the sampled softmax with a hand-written backward (sampled_softmax.py, which the package's pretraining head
  calls when its model runs on the kernels).

Their numbers equal the plain model's up to float32 rounding (int8: up to its quantisation); the tests compare
them with it. Inference copies of weights live here, keyed by the weights they were made from, and are all
dropped when the model goes back to training (`clear`, called by `ElmoModel.train`).
"""

from __future__ import annotations

import torch

from .bilstm import BiLstmRunner
from .character_encoder import encode, encode_tokens
from .token_cache import TokenCache

IMPLEMENTATIONS = ("auto", "fast", "int8")


class ElmoKernels:
    """The kernel state of one `ElmoModel`: its implementation choice and its caches (never saved or copied)."""

    def __init__(self, implementation: str = "auto", keep_inference_copies: bool = True):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"hf-elmo's kernels implement {', '.join(IMPLEMENTATIONS)}, not {implementation!r}")
        self.implementation = implementation
        #: Keep the oneDNN-packed / int8 copies of the LSTM weights and the input-product buffer between calls:
        #: fastest, at the memory of one more copy of the per-step weights; False makes them for each call.
        self.keep_inference_copies = keep_inference_copies
        self._runners: dict[int, BiLstmRunner] = {}
        self.token_cache: TokenCache | None = None

    # Copies of a model (copy.deepcopy, pickle, torch.save) start with empty caches: oneDNN's packed weights
    # cannot be copied at all, and the others would be copies of the old weights.
    def __reduce__(self):
        return (ElmoKernels, (self.implementation, self.keep_inference_copies))

    def __deepcopy__(self, memo):
        return ElmoKernels(self.implementation, self.keep_inference_copies)

    def __repr__(self) -> str:
        return f"ElmoKernels({self.implementation!r})"

    def runs(self, like: torch.Tensor) -> bool:
        """Whether the kernels compute for tensors like `like`: "auto" only on the CPU, where they were written and
        measured and where reading the lengths on the host (their rows are sorted by length) costs nothing."""
        return self.implementation != "auto" or like.device.type == "cpu"

    def clear(self) -> None:
        """Drop every inference copy, buffer and the token cache (the weights are about to change)."""
        self._runners.clear()
        self.token_cache = None

    def encode_tokens(self, encoder, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        cache = self.token_cache
        usable = (
            cache is not None and cache.encoder is encoder and not encoder.training
            and not (torch.is_grad_enabled() and any(p.requires_grad for p in encoder.parameters()))
            and cache.is_valid_for(encoder)
        )
        return encode_tokens(encoder, char_ids, word_ids, cache if usable else None)

    def bilstm(self, module, inputs, lengths, initial_state=None, dropout: float = 0.0, skip_final_step: bool = False):
        runner = self._runners.get(id(module))
        if runner is None or runner.bilstm is not module:
            runner = self._runners[id(module)] = BiLstmRunner(module, self.implementation, self.keep_inference_copies)
        return runner(inputs, lengths, initial_state, dropout, skip_final_step)


@torch.no_grad()
def build_token_cache(model, char_ids: torch.Tensor, batch_size: int = 1024) -> int:
    """Precompute layer 0 of a vocabulary so that known words skip the character CNN at inference.

    `model`: an `ElmoModel` (or a head holding one) running on the kernels; `char_ids`: `(V,
    max_characters_per_token)` ids of the words, e.g. `torch.tensor([tokenizer.word_to_char_ids(w) for w in words])`
    (`<S>`/`</S>` are added). The cache is kept in memory only (never saved), used in eval mode without gradients,
    and dropped when the model trains or its character-encoder weights change. Returns the number of cached tokens.
    """
    elmo = getattr(model, "elmo", model)
    kernels = elmo.kernels
    if kernels is None:
        raise ValueError("the token cache is part of hf-elmo's kernels: load the model with "
                         "lstm_implementation='auto' (the default) or call set_lstm_implementation('auto') first")
    encoder = elmo.char_encoder
    if encoder.word_embedding is not None:
        raise ValueError("a token cache needs a model without a word embedding (its vectors depend on word ids)")
    width = elmo.config.max_characters_per_token
    if not isinstance(char_ids, torch.Tensor) or char_ids.dim() != 2 or char_ids.shape[1] != width:
        raise ValueError(f"char_ids must be a (num_words, {width}) tensor of character ids")
    if char_ids.shape[0]:
        elmo.validate_inputs(char_ids.unsqueeze(0))  # integer ids inside the character vocabulary
        if bool((char_ids == 0).all(dim=1).any()):
            raise ValueError("char_ids has an all-zero row: that is a padded position, not a word")
    device = encoder.projection.weight.device
    ids = torch.unique(torch.cat([elmo.sentence_boundary_char_ids().to(char_ids.device), char_ids.long()]).to(device), dim=0)
    was_training = encoder.training
    encoder.eval()
    vectors = torch.cat([encode(encoder, ids[i : i + batch_size]) for i in range(0, ids.shape[0], batch_size)])
    encoder.train(was_training)
    kernels.token_cache = TokenCache(encoder, ids, vectors)
    return ids.shape[0]


__all__ = ["IMPLEMENTATIONS", "ElmoKernels", "build_token_cache"]
