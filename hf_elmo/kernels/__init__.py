"""hf-elmo's fast kernels for the plain PyTorch biLM of `bilm_elmo.py` (package only, never remote code).

Importing this package registers them in `bilm_elmo.ElmoKernelInterface` as "auto" (the default of every
model hf-elmo loads), "fast" and "int8": functions with the signatures of the reference functions, which a model
looks up by its `lstm_implementation` when it runs (never while torch.compile / torch.export trace it).

- layer 0: each distinct token encoded once, the padding tail cut, convolutions as products on oneDNN
  (character_encoder.py), optionally a token cache (`build_token_cache`, token_cache.py);
- the biLSTM: a batch-major recurrence with a hand-written backward, oneDNN's packed per-step products for CPU
  float32 inference, int8 weights on request (bilstm.py, lstm_recurrence.py, matrix_products.py, quantization.py);
- the sampled softmax with a hand-written backward (sampled_softmax.py, which the package's pretraining head
  calls when its model runs on the kernels).

Their numbers equal the reference functions' up to float32 rounding (int8: up to its quantisation); the tests
compare them. "auto" computes on the kernels for CPU tensors and with the reference functions elsewhere. Inference
copies of weights and token caches are kept per module (a copy of a model starts without them), keyed by the
weights they were made from, and dropped when the model goes back to training (`release`).
"""

from __future__ import annotations

import weakref

import torch

from ..models.elmo.bilm_elmo import (
    ElmoKernelFunctions,
    ElmoKernelInterface,
    reference_bilstm,
    reference_character_encoder,
)
from .bilstm import BiLstmRunner
from .character_encoder import encode, encode_tokens
from .token_cache import TokenCache

IMPLEMENTATIONS = ("auto", "fast", "int8")

# Per `ElmoBiLstm`: its runner (inference copies of the weights, scratch buffers); per `ElmoCharacterEncoder`: the
# token cache `build_token_cache` made for it. Weak keys: a model's state goes with it.
_runners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_token_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _character_encoder(implementation: str):
    def character_encoder(encoder, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        if implementation == "auto" and char_ids.device.type != "cpu":
            return reference_character_encoder(encoder, char_ids, word_ids)
        # Padding rows (all zeros) are left out: the kernels' products then see exactly the rows of real tokens.
        real = (char_ids != 0).any(dim=-1)
        selected = None if word_ids is None else word_ids[real]
        cache = _token_caches.get(encoder)
        usable = (cache is not None and not encoder.training and cache.is_valid_for(encoder)
                  and not (torch.is_grad_enabled() and any(p.requires_grad for p in encoder.parameters())))
        encoded = encode_tokens(encoder, char_ids[real], selected, cache if usable else None)
        tokens = encoded.new_zeros(char_ids.shape[0], encoded.shape[-1])
        tokens[real] = encoded
        return tokens

    return character_encoder


def _runner(module, implementation: str) -> BiLstmRunner:
    """The runner of `module` (an `ElmoBiLstm`) for `implementation`, made on first use."""
    runner = _runners.get(module)
    if runner is None or runner.implementation != implementation:
        runner = _runners[module] = BiLstmRunner(module, implementation)
    return runner


def _bilstm(implementation: str):
    def bilstm(module, inputs, lengths, initial_state=None, dropout: float = 0.0, skip_final_step: bool = False):
        if implementation == "auto" and inputs.device.type != "cpu":
            return reference_bilstm(module, inputs, lengths, initial_state, dropout, skip_final_step)
        return _runner(module, implementation)(inputs, lengths, initial_state, dropout, skip_final_step)

    return bilstm


def release(model) -> None:
    """Drop the inference copies, buffers and token cache of `model` (an `ElmoModel` or `ElmoBiLm`): its weights are
    about to change. Their `train()` (`ElmoBiLmMixin.train`) calls it."""
    _runners.pop(model.bilstm, None)
    _token_caches.pop(model.char_encoder, None)


def token_cache_of(model) -> TokenCache | None:
    """The token cache of `model` (an `ElmoModel` or a head holding one), if `build_token_cache` made one."""
    return _token_caches.get(getattr(model, "elmo", model).char_encoder)


def set_keep_inference_copies(model, keep: bool) -> None:
    """Whether `model`'s biLSTM keeps the oneDNN-packed / int8 copies of its weights and the input-product buffer
    between calls (fastest, at the memory of one more copy of the per-step weights) or makes them for each call."""
    elmo = getattr(model, "elmo", model)
    _runner(elmo.bilstm, elmo.lstm_implementation).keep_inference_copies = keep


for _name in IMPLEMENTATIONS:
    ElmoKernelInterface.register(_name, ElmoKernelFunctions(_character_encoder(_name), _bilstm(_name), release))


@torch.no_grad()
def build_token_cache(model, char_ids: torch.Tensor, batch_size: int = 1024) -> int:
    """Precompute layer 0 of a vocabulary so that known words skip the character CNN at inference.

    `model`: an `ElmoModel` (or a head holding one) running on the kernels; `char_ids`: `(V,
    max_characters_per_token)` ids of the words, e.g. `torch.tensor([tokenizer.word_to_char_ids(w) for w in words])`
    (`<S>`/`</S>` are added). The cache is kept in memory only (never saved), used in eval mode without gradients,
    and dropped when the model trains or its character-encoder weights change. Returns the number of cached tokens.
    """
    elmo = getattr(model, "elmo", model)
    if elmo.lstm_implementation == "reference":
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
    _token_caches[encoder] = TokenCache(encoder, ids, vectors)
    return ids.shape[0]


__all__ = ["IMPLEMENTATIONS", "build_token_cache", "release", "set_keep_inference_copies", "token_cache_of"]
