"""The biLM's pretraining head (package only: pretraining runs on hf-elmo's Trainer, so this is not remote code).

`ElmoForPreTraining` puts the paper's objective on an `ElmoModel`: the forward language model predicts word k from
the words before it, the backward one from the words after it, both through one shared word softmax, full or
importance-sampled (`log_uniform_samples`, `sampled_softmax_losses`: the plain formula; on hf-elmo's kernels the same
loss with a hand-written backward, kernels/sampled_softmax.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.utils import ModelOutput

from ..kernels.sampled_softmax import sampled_softmax_losses as fast_sampled_softmax_losses
from ..models.elmo.bilm_elmo import _refuse_unknown_arguments
from ..models.elmo.configuration_elmo import ElmoConfig
from ..models.elmo.modeling_elmo import ElmoModel, ElmoPreTrainedModel, init  # init: 4.x too


@dataclass
class ElmoForPreTrainingOutput(ModelOutput):
    """
    Output of [`ElmoForPreTraining`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, returned with `labels`):
            Mean of the forward and backward language models' cross-entropies (perplexity = exp(loss)).
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`): each direction's mean cross-entropy.
        num_predictions (`torch.LongTensor` of shape `()`): predictions per direction in the batch.
        forward_hidden_states, backward_hidden_states (`torch.FloatTensor` of shape
            `(batch_size, num_words + 2, projection_dim)`): top LSTM layer of each direction, boundaries included.
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states`): the L+1 layers of this
            pass, `(batch_size, num_words, 2 * projection_dim)` each, as `ElmoModel` returns them.
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    num_predictions: torch.LongTensor | None = None
    forward_hidden_states: torch.FloatTensor | None = None
    backward_hidden_states: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


def log_uniform_samples(vocab_size: int, num_sampled: int, device, generator: torch.Generator | None = None):
    """`num_sampled` word ids drawn with replacement from P(w) = log((w + 2) / (w + 1)) / log(V + 1) (a Zipf law over
    the frequency-sorted vocabulary), and the log of their expected counts log(K P(w)), their logits' correction."""
    log_range = torch.log1p(torch.tensor(float(vocab_size), dtype=torch.float64))
    uniform = torch.rand(num_sampled, dtype=torch.float64, generator=generator).to(device)
    samples = (torch.exp(uniform * log_range.to(device)).long() - 1).clamp_(0, vocab_size - 1)
    probability = (torch.log((samples + 2).double()) - torch.log((samples + 1).double())) / log_range.to(device)
    return samples, torch.log(num_sampled * probability)


def sampled_softmax_losses(hidden, weight, bias, targets, samples, log_expected) -> torch.Tensor:
    """Importance-sampled softmax (Jean et al. 2015, as bilm-tf trains ELMo): per-row losses (N,) of hidden (N, P)
    against its targets (N,) and the shared negatives `samples` (K,), accidental hits removed."""
    log_expected = log_expected.to(hidden.dtype)
    true_logits = (hidden * weight[targets]).sum(-1) + bias[targets]
    sampled_logits = hidden @ weight[samples].t() + bias[samples] - log_expected
    sampled_logits = sampled_logits.masked_fill(samples.unsqueeze(0) == targets.unsqueeze(1), float("-inf"))
    logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
    return torch.logsumexp(logits, dim=1) - true_logits


class ElmoLanguageModelSoftmax(nn.Module):
    """The word softmax shared by the forward and backward language models (the paper ties it). Training with
    `config.lm_softmax == "sampled"` uses the sampled softmax; evaluation always the full one (exact perplexities)."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(config.lm_vocab_size, config.projection_dim))
        self.bias = nn.Parameter(torch.empty(config.lm_vocab_size))
        self.sampled = config.lm_softmax == "sampled"
        self.num_sampled = config.lm_num_sampled

    def full_loss(self, hidden: torch.Tensor, targets: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
        return F.cross_entropy(F.linear(hidden, self.weight, self.bias), targets, reduction=reduction)

    def sampled_loss(self, hidden, targets, reduction: str = "sum", generator=None, losses=sampled_softmax_losses):
        samples, log_expected = log_uniform_samples(self.weight.shape[0], self.num_sampled, hidden.device, generator)
        per_row = losses(hidden, self.weight, self.bias, targets, samples, log_expected)
        return per_row.sum() if reduction == "sum" else per_row

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, losses=sampled_softmax_losses) -> torch.Tensor:
        if self.sampled and self.training:
            return self.sampled_loss(hidden, targets, losses=losses)
        return self.full_loss(hidden, targets)


class ElmoForPreTraining(ElmoPreTrainedModel):
    """ELMo's biLM objective: the forward LM predicts word k from words < k, the backward LM from words > k.

    The token representation and the softmax are shared by both directions; the LSTMs are not. `labels` are word
    ids into `config.lm_vocab` (`<S>`=0, `</S>`=1, `<UNK>`=2), one per input word, -100 at padding; the model adds
    the `<S>`/`</S>` targets itself.
    """

    _keys_to_ignore_on_load_missing = [r"scalar_mixes"]
    accepts_loss_kwargs = False  # the loss is already a mean

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.softmax = ElmoLanguageModelSoftmax(config)
        self.dropout = nn.Dropout(config.lm_dropout)
        self.post_init()
        # The layer mix is a downstream-task parameter: pretraining must not touch it (nor DDP wait for it).
        self.elmo.scalar_mixes.requires_grad_(False)

    @torch.no_grad()
    def _init_weights(self, module):
        if isinstance(module, ElmoLanguageModelSoftmax):
            init.normal_(module.weight, std=module.weight.shape[1] ** -0.5)
            init.zeros_(module.bias)
        else:
            super()._init_weights(module)

    def forward(self, input_ids, attention_mask=None, labels=None, word_ids=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`)
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*)
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                word ids in `config.lm_vocab` of the input words, -100 at padded positions.
            output_hidden_states (`bool`, *optional*): also return the L+1 layers as this pass computed them (with
                the pretraining dropout in training mode), shaped as `ElmoModel` returns them.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if labels is not None and not self.config.lm_vocab_size:
            raise ValueError("ElmoForPreTraining needs config.lm_vocab (the word vocabulary of the softmax) to "
                             "compute a loss: pass lm_vocab= when loading from an encoder folder")
        elmo = self.elmo
        elmo._check_shapes(input_ids, attention_mask, word_ids)
        input_ids = input_ids.long()
        mask = (input_ids > 0).any(dim=-1) if attention_mask is None else attention_mask.to(input_ids.device).bool()
        tokens, lengths = elmo.token_representations(input_ids, mask, word_ids)
        tokens = self.dropout(tokens)
        layers, _ = elmo.run_bilstm(tokens, lengths, dropout=self.config.lm_dropout)
        projection_dim = self.config.projection_dim
        top = self.dropout(layers[-1])
        forward_hidden, backward_hidden = top[..., :projection_dim], top[..., projection_dim:]

        loss = forward_loss = backward_loss = num_predictions = None
        if labels is not None:
            if tuple(labels.shape) != tuple(mask.shape):
                raise ValueError(f"labels must have shape {tuple(mask.shape)} (batch, words), got {tuple(labels.shape)}")
            batch, steps = tokens.shape[:2]
            positions = torch.arange(steps, device=tokens.device).unsqueeze(0)
            # Targets of the whole row [<S>, words..., </S>]; positions past </S> are never used.
            targets = labels.new_full((batch, steps), 1)
            targets[:, 0] = 0
            targets[:, 1:-1] = torch.where(mask, labels, targets[:, 1:-1])
            forward_valid = positions[:, :-1] < (lengths - 1).unsqueeze(1)  # position t predicts t + 1
            backward_valid = positions[:, 1:] < lengths.unsqueeze(1)  # position t predicts t - 1
            num_predictions = forward_valid.sum()
            plain = elmo.lstm_implementation == "reference" or torch.compiler.is_compiling()
            losses = sampled_softmax_losses if plain else fast_sampled_softmax_losses
            forward_loss = self.softmax(forward_hidden[:, :-1][forward_valid], targets[:, 1:][forward_valid], losses)
            backward_loss = self.softmax(backward_hidden[:, 1:][backward_valid], targets[:, :-1][backward_valid], losses)
            forward_loss, backward_loss = forward_loss / num_predictions, backward_loss / num_predictions
            loss = (forward_loss + backward_loss) / 2

        hidden_states = None
        if output_hidden_states:
            keep = mask.unsqueeze(-1).to(tokens.dtype)
            hidden_states = tuple(layer[:, 1:-1] * keep for layer in [torch.cat([tokens, tokens], dim=-1), *layers])
        output = ElmoForPreTrainingOutput(loss=loss, forward_loss=forward_loss, backward_loss=backward_loss,
                                          num_predictions=num_predictions, forward_hidden_states=forward_hidden,
                                          backward_hidden_states=backward_hidden, hidden_states=hidden_states)
        return output if return_dict else output.to_tuple()


__all__ = ["ElmoForPreTraining", "ElmoForPreTrainingOutput", "ElmoLanguageModelSoftmax", "log_uniform_samples",
           "sampled_softmax_losses"]
