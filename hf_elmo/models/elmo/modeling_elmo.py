"""PyTorch ELMo (Peters et al., 2018) as transformers models, top-down in the order data flows through them:

1-3. the biLM                `ElmoCharacterEncoder` -> `ElmoBiLstm` -> `ElmoScalarMix`, and what the encoder computes
                             (`ElmoBiLmMixin`): bilm_elmo.py, plain PyTorch
4. `ElmoModel`               the encoder users load: the biLM as a transformers `PreTrainedModel`
5. heads                     `ElmoForTokenClassification` (+ `ElmoCrf`), `ElmoForCharacterTagging`,
                             `ElmoForSequenceClassification`
6. the tagging pipeline      `ElmoTokenClassificationPipeline`: raw text in, entity spans out
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Pipeline, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

try:
    from transformers import initialization as init
except ImportError:  # transformers 4.x: torch's (4.x initialises only the weights it did not load)
    import types

    init = types.SimpleNamespace(**vars(nn.init), copy_=lambda tensor, other: tensor.copy_(other))

from .bilm_elmo import (ElmoBiLmMixin, ElmoBiLstmLayer, ElmoCharacterEncoder, ElmoHighwayLayer, ElmoScalarMix,
                        _check_implementation, _refuse_unknown_arguments, weight_problems)
from .configuration_elmo import ElmoConfig
from .text_elmo import character_places, tag_spans


# 4. The model ---------------------------------------------------------------------------------------------------
class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, lstm_implementation: str | None = None, **kwargs):
        r"""transformers' `from_pretrained` (from safetensors: a pytorch_model.bin is never unpickled), plus
        `lstm_implementation` (a name in `ElmoKernelInterface`; not saved). A checkpoint that lacks tensors of the
        biLM, holds foreign ones or holds values that are not finite is refused (ValueError naming them), unless the
        caller inspects the load with `output_loading_info=True`."""
        implementation = _check_implementation(lstm_implementation)
        kwargs.setdefault("use_safetensors", True)
        inspecting = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *args, output_loading_info=True,
                                                      **kwargs)
        model.set_lstm_implementation(implementation)
        model._after_loading(loading_info)
        if inspecting:
            return model, loading_info
        source = pretrained_model_name_or_path
        if source is not None and (problem := weight_problems(model, loading_info, source)):
            raise ValueError(f"{problem}, or pass output_loading_info=True to inspect what was loaded")
        return model

    def _after_loading(self, loading_info: dict) -> None:
        """What a head does once its weights are in (see `ElmoHeadModel`)."""

    def __init__(self, config: ElmoConfig, *inputs, **kwargs):
        config.check_values()  # `from_pretrained(..., field=value)` sets its arguments after the config was checked
        super().__init__(config, *inputs, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        # transformers writes only the saved class's own entry into `config.auto_map`; list every ELMo class
        # registered for remote code, so that any head loads from this folder.
        if self._auto_class is not None:  # is_remote_code() (5.x)
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}),
                                    **_remote_code_auto_map(type(self))}
        result = super().save_pretrained(save_directory, *args, **kwargs)
        # safetensors writes through mkstemp (mode 0600): give the weights the mode config.json got from the umask.
        config_file = os.path.join(save_directory, "config.json")
        if kwargs.get("is_main_process", True) and os.path.isfile(config_file):
            mode = os.stat(config_file).st_mode & 0o777
            for name in os.listdir(save_directory):
                if name.endswith(".safetensors") and not os.path.islink(os.path.join(save_directory, name)):
                    os.chmod(os.path.join(save_directory, name), mode)
        return result

    def set_lstm_implementation(self, implementation: str | None = None) -> None:
        """Choose how the biLM computes from now on (`ElmoBiLmMixin.set_lstm_implementation`)."""
        self.base_model.set_lstm_implementation(implementation)

    @property
    def lstm_implementation(self) -> str:
        return self.base_model.lstm_implementation

    @torch.no_grad()
    def _init_weights(self, module):
        if isinstance(module, ElmoBiLstmLayer):
            bound = module.cell_dim**-0.5
            for weight in (module.input_weight, module.recurrent_weight, module.projection_weight):
                init.uniform_(weight, -bound, bound)
            init.zeros_(module.bias)
        elif isinstance(module, ElmoHighwayLayer):
            init.normal_(module.weight, std=module.in_features**-0.5)
            # A negative carry bias starts every highway layer close to the identity (as bilm-tf does).
            size = module.in_features
            init.copy_(module.bias, torch.cat([torch.zeros(size), torch.full((size,), -2.0)]))
        elif isinstance(module, ElmoScalarMix):
            init.zeros_(module.scalar_parameters)
            init.ones_(module.gamma)
        elif isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -1.0, 1.0)
            # Slicing drops the "already loaded" flag, so check it on the full weight.
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.Conv1d):
            init.normal_(module.weight, std=(module.in_channels * module.kernel_size[0]) ** -0.5)
            init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            init.normal_(module.weight, std=module.in_features**-0.5)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LSTM):
            bound = module.hidden_size**-0.5
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)
        elif isinstance(module, ElmoCrf):
            for parameter in module.parameters():
                init.zeros_(parameter)


def _remote_code_auto_map(model_class: type) -> dict[str, str]:
    """`{auto class: "modeling_elmo.Class"}` for the ELMo classes of this file registered for remote code: the first
    class of each auto class, or the saved class (a character tagger's token classification)."""
    auto_map = {}
    for value in vars(sys.modules[__name__]).values():
        auto_class = value.__dict__.get("_auto_class") if isinstance(value, type) else None
        if auto_class is not None and issubclass(value, ElmoPreTrainedModel) and (
                value is model_class or auto_class not in auto_map):
            auto_map[auto_class] = f"{__name__.rsplit('.', 1)[-1]}.{value.__name__}"
    return auto_map


class ElmoModel(ElmoBiLmMixin, ElmoPreTrainedModel):
    """The ELMo encoder: character ids of words in, every biLM layer and the learned ELMo mixes out (`forward`,
    `validate_inputs`, `token_embeddings`: `ElmoBiLmMixin`, bilm_elmo.py). Stateless by default: each sentence
    starts from a zero LSTM state, so its vectors depend neither on the batch it is in nor on earlier calls; pass
    `initial_state` / `return_state=True` to carry state between calls as AllenNLP and bilm-tf do."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self._add_bilm_modules(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.char_encoder.char_embedding

    def set_input_embeddings(self, value: nn.Embedding):
        self.char_encoder.char_embedding = value


# 5. Heads -------------------------------------------------------------------------------------------------------
# Score given to tags that a partial label rules out; finite so that gradients stay defined.
_IMPOSSIBLE = -1e4


class ElmoCrf(nn.Module):
    """Linear-chain conditional random field over tag scores: a path y_1..y_n scores ``start[y_1] + sum_t
    emissions[t, y_t] + sum_t transitions[y_{t-1}, y_t] + end[y_n]``. Methods take `emissions` (batch, words, tags)
    and a `mask` (batch, words) of real words (ones then zeros per row); rows with no words contribute nothing."""

    def __init__(self, num_tags: int):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]

    def _forward_scores(self, emissions, mask) -> list[torch.Tensor]:
        """log-sum of the scores of every path ending in each tag at each word (a row's score stops at its end)."""
        alphas = [self.start_transitions + emissions[:, 0]]
        for t in range(1, emissions.shape[1]):
            step = torch.logsumexp(alphas[-1].unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alphas.append(torch.where(mask[:, t : t + 1], step, alphas[-1]))
        return alphas

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z: logsumexp of the scores of every path, shape (batch,)."""
        mask = mask.bool()
        if emissions.shape[1] == 0:
            return emissions.new_zeros(emissions.shape[0])
        log_z = torch.logsumexp(self._forward_scores(emissions, mask)[-1] + self.end_transitions, dim=1)
        return torch.where(mask.any(dim=1), log_z, torch.zeros_like(log_z))

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) per sentence; a tag of -100 on a real word leaves it unlabelled (all tags count)."""
        allowed = F.one_hot(tags.clamp(min=0), emissions.shape[-1]).bool() | (tags == -100).unsqueeze(-1)
        constrained = self.log_partition(emissions.masked_fill(~allowed, _IMPOSSIBLE), mask)
        return constrained - self.log_partition(emissions, mask)

    def marginals(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag at word t | sentence) by forward-backward, (batch, words, tags), 0 at padding."""
        mask = mask.bool()
        num_words = emissions.shape[1]
        if num_words == 0:
            return torch.zeros_like(emissions)
        alphas = self._forward_scores(emissions, mask)
        end = self.end_transitions.expand_as(alphas[0])
        betas = [end]
        for t in range(num_words - 2, -1, -1):
            step = torch.logsumexp(self.transitions + (emissions[:, t + 1] + betas[-1]).unsqueeze(1), dim=2)
            # Word t is its sentence's last when word t+1 is padding: nothing follows but the end transition.
            betas.append(torch.where(mask[:, t + 1 : t + 2], step, end))
        log_z = torch.logsumexp(alphas[-1] + self.end_transitions, dim=1)
        scores = torch.stack(alphas, dim=1) + torch.stack(betas[::-1], dim=1) - log_z[:, None, None]
        return scores.exp() * mask.unsqueeze(-1).to(scores.dtype)

    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor, pad_id: int = -100) -> torch.Tensor:
        """Highest-scoring tag sequence per sentence, (batch, words) with `pad_id` past each end."""
        mask = mask.bool()
        batch, num_words, num_tags = emissions.shape
        if num_words == 0:
            return torch.full((batch, 0), pad_id, dtype=torch.long, device=emissions.device)
        score = self.start_transitions + emissions[:, 0]
        keep = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
        backpointers = []
        for t in range(1, num_words):
            best_score, best_previous = (score.unsqueeze(2) + self.transitions).max(dim=1)
            step_mask = mask[:, t : t + 1]
            score = torch.where(step_mask, best_score + emissions[:, t], score)
            # Past a row's end the path stays on its last tag, so backtracking starts from the true end.
            backpointers.append(torch.where(step_mask, best_previous, keep))
        path = [(score + self.end_transitions).argmax(dim=1)]
        for pointers in reversed(backpointers):
            path.append(pointers.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        return torch.stack(path[::-1], dim=1).masked_fill(~mask, pad_id)


def reduce_loss(total: torch.Tensor, count, num_items_in_batch=None) -> torch.Tensor:
    """A sum over labelled items -> the mean over this batch's `count`, or over the whole accumulated batch's items
    when `Trainer` passes `num_items_in_batch`, so that accumulated micro-batches add up to the large batch's loss."""
    return total / (num_items_in_batch if num_items_in_batch is not None else torch.as_tensor(count).clamp(min=1))


def tagging_loss(logits, labels, mask, crf=None, num_items_in_batch=None) -> torch.Tensor:
    """Mean over labelled positions (-100: none) of the cross-entropy, or with a CRF of the sentences' summed
    negative log-likelihoods; `labels` and `mask` are (batch, positions)."""
    if tuple(labels.shape) != tuple(mask.shape):
        raise ValueError(f"labels must have shape (batch, words) = {tuple(mask.shape)}, one label per word; "
                         f"got {tuple(labels.shape)}")
    labels = labels.to(device=mask.device, dtype=torch.long)
    labelled = (labels != -100) & mask
    if not bool(((labels[labelled] >= 0) & (labels[labelled] < logits.shape[-1])).all()):
        bad = labels[labelled & ((labels < 0) | (labels >= logits.shape[-1]))][0]
        raise ValueError(f"label id {int(bad)} is outside [0, {logits.shape[-1]}) (use -100 for 'no label')")
    total = (-crf.log_likelihood(logits, labels.masked_fill(~mask, -100), mask).sum() if crf is not None
             else F.cross_entropy(logits[labelled].float(), labels[labelled], reduction="sum"))
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


def classification_loss(logits, labels, problem_type: str | None = None, num_items_in_batch=None) -> torch.Tensor:
    """A sentence classifier's loss by `problem_type`, inferred as transformers does when unset: regression for one
    label, multi-label for floating-point labels, else single-label (class ids, -100 leaves a sentence out).
    (transformers' own loss averages regression and multi-label losses per micro-batch, hence this one.)"""
    batch, num_labels = logits.shape
    if problem_type is None:
        problem_type = ("regression" if num_labels == 1 else
                        "multi_label_classification" if labels.is_floating_point() else "single_label_classification")
    if problem_type == "regression":
        shapes = [(batch, num_labels)] + ([(batch,)] if num_labels == 1 else [])
        if tuple(labels.shape) not in shapes:
            raise ValueError(f"regression labels must have shape {' or '.join(map(str, shapes))}, "
                             f"got {tuple(labels.shape)}")
    elif problem_type == "multi_label_classification" and tuple(labels.shape) != (batch, num_labels):
        raise ValueError(f"multi-label classification (floating-point labels) needs labels of shape ({batch}, "
                         f"{num_labels}), got {tuple(labels.shape)}; for one class id per sentence pass integer labels")
    if problem_type in ("regression", "multi_label_classification"):
        targets = labels.to(device=logits.device, dtype=torch.float32).reshape(batch, num_labels)
        loss = F.mse_loss if problem_type == "regression" else F.binary_cross_entropy_with_logits
        return reduce_loss(loss(logits.float(), targets, reduction="sum"), targets.numel(), num_items_in_batch)
    if tuple(labels.shape) != (batch,):
        raise ValueError(f"labels must have shape (batch,) = ({batch},), got {tuple(labels.shape)}")
    labels = labels.to(device=logits.device, dtype=torch.long)
    labelled = labels != -100
    real = labels[labelled]
    if real.numel() and not bool(((real >= 0) & (real < num_labels)).all()):
        raise ValueError(f"class ids must be in [0, {num_labels}) or -100, got {real.tolist()}")
    total = F.cross_entropy(logits[labelled].float(), real, reduction="sum")
    return reduce_loss(total, labelled.sum(), num_items_in_batch)


class ElmoHeadModel(ElmoPreTrainedModel):
    """What the task heads share: the biLM (frozen by default, `config.freeze_elmo`), the head's own learned mix,
    optionally its own word vectors x_k (`config.task_token_features`), dropout; and precomputed biLM layers
    (`elmo_hidden_states`) in place of running the biLM."""

    accepts_loss_kwargs = True

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.elmo = ElmoModel(config)
        # The head's own mix, so that it trains even when the biLM is frozen.
        self.scalar_mix = ElmoScalarMix(config.num_lstm_layers + 1, layer_norm=config.scalar_mix_layer_norm)
        self.token_features = ElmoCharacterEncoder(config) if config.task_token_features else None
        self.feature_size = config.hidden_size + (config.projection_dim if config.task_token_features else 0)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.set_elmo_frozen(config.freeze_elmo)

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.token_features is not None:  # the head's own x_k reads the same characters
            self.token_features.char_embedding = self._get_resized_embeddings(
                self.token_features.char_embedding, embeddings.num_embeddings, mean_resizing=mean_resizing)
        return embeddings

    def set_elmo_frozen(self, frozen: bool = True) -> None:
        """Freeze (or unfreeze) the biLM; the head's mix and layers always train."""
        self.config.freeze_elmo = bool(frozen)
        self.elmo.requires_grad_(not frozen)
        # Unused parameters that require gradients break DistributedDataParallel: the encoder's mixes stay out.
        self.elmo.scalar_mixes.requires_grad_(False)

    def _after_loading(self, loading_info: dict) -> None:
        if self.token_features is not None and any(key.startswith("token_features.")
                                                   for key in loading_info["missing_keys"]):
            # A biLM checkpoint without a task head: the head's word vectors start as the biLM's layer 0.
            self.token_features.load_state_dict(self.elmo.char_encoder.state_dict())
        self.set_elmo_frozen(self.config.freeze_elmo)  # loading swaps in fresh parameters (requires_grad=True)

    def elmo_layers(self, input_ids, attention_mask, word_ids=None, elmo_hidden_states=None):
        """The biLM's L+1 layers and the word mask: run the biLM (without autograd when frozen), or check and take
        `elmo_hidden_states` ((batch, L+1, words, 2P), or L+1 tensors (batch, words, 2P)) computed beforehand."""
        if elmo_hidden_states is None:
            if input_ids is None:
                raise ValueError("pass input_ids (character ids) or elmo_hidden_states (precomputed biLM layers)")
            track = torch.is_grad_enabled() and any(p.requires_grad for p in self.elmo.parameters())
            with torch.set_grad_enabled(track):
                outputs = self.elmo(input_ids, attention_mask=attention_mask, word_ids=word_ids,
                                    output_hidden_states=True, return_dict=True)
            return outputs.hidden_states, outputs.mask.bool()
        if input_ids is not None and self.token_features is None:
            raise ValueError("pass either input_ids or elmo_hidden_states, not both")
        if not self.config.freeze_elmo:
            raise ValueError("elmo_hidden_states (precomputed biLM layers) need a frozen biLM (config.freeze_elmo)")
        if attention_mask is None:
            raise ValueError("elmo_hidden_states need the attention_mask that says which positions are words")
        expected = (*attention_mask.shape, self.config.hidden_size)
        layers = elmo_hidden_states.unbind(1) if torch.is_tensor(elmo_hidden_states) else tuple(elmo_hidden_states)
        if len(layers) != self.config.num_lstm_layers + 1 or any(tuple(layer.shape) != expected for layer in layers):
            raise ValueError(f"elmo_hidden_states must be (batch, {self.config.num_lstm_layers + 1} layers, words, "
                             f"{self.config.hidden_size}) to match attention_mask {tuple(attention_mask.shape)}, got "
                             f"{[tuple(layer.shape) for layer in layers]}")
        return layers, attention_mask.to(layers[0].device).bool()

    def mixed_vectors(self, input_ids, attention_mask, word_ids=None, elmo_hidden_states=None):
        """((B, W, F) mixed and dropped-out word vectors, (B, W) mask, the biLM layers); F = `feature_size`."""
        layers, mask = self.elmo_layers(input_ids, attention_mask, word_ids, elmo_hidden_states)
        mixed = self.scalar_mix(layers, mask)
        if self.token_features is not None:
            mixed = torch.cat([self.own_word_vectors(input_ids, mask, word_ids).to(mixed.dtype), mixed], dim=-1)
        return self.dropout(mixed), mask, layers

    def own_word_vectors(self, input_ids, mask, word_ids=None, name: str = "input_ids") -> torch.Tensor:
        """The head's x_k of each word (zeros at padding): (B, W, P)."""
        if input_ids is None:
            raise ValueError(f"config.task_token_features: the head's own word vectors need {name} (character ids), "
                             "also when the biLM layers come precomputed in elmo_hidden_states")
        if tuple(input_ids.shape[:2]) != tuple(mask.shape):
            raise ValueError(f"{name} must be (batch, positions, characters) with (batch, positions) = "
                             f"{tuple(mask.shape)}, got {tuple(input_ids.shape)}")
        input_ids, mask = input_ids.to(mask.device).long(), mask.bool()
        char_ids = input_ids * mask.unsqueeze(-1).to(input_ids.dtype)
        flat_word_ids = None if word_ids is None else word_ids.to(mask.device).reshape(-1)
        vectors = self.elmo.encode_tokens(self.token_features, char_ids.reshape(-1, char_ids.shape[-1]), flat_word_ids)
        return vectors.view(*mask.shape, vectors.shape[-1])


@dataclass
class ElmoTokenClassifierOutput(TokenClassifierOutput):
    """[`TokenClassifierOutput`] plus `predictions` (`torch.LongTensor` of shape `(batch_size, num_positions)`,
    *optional*): the best tags as `ElmoTagger.decode` gives them (-100 at padding), returned in eval mode."""

    predictions: torch.LongTensor | None = None


class ElmoTaskBiLstm(nn.LSTM):
    """The tagging head's bidirectional LSTM over padded batches: each row runs over its own words only (packed);
    positions past them are zeros. (An `nn.LSTM` itself, so saved taggers keep their weight names.)"""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__(input_size, hidden_size, num_layers=num_layers, bidirectional=True, batch_first=True,
                         dropout=dropout if num_layers > 1 else 0.0)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, words, features), (batch, words) bool -> (batch, words, 2 * hidden_size)."""
        if inputs.shape[1] == 0:
            return inputs.new_zeros(inputs.shape[0], 0, 2 * self.hidden_size)
        # pack_padded_sequence wants host-side lengths; an empty row runs one padding step, ignored later.
        lengths = mask.sum(dim=1).clamp(min=1).tolist()
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        encoded, _ = super().forward(packed)
        return nn.utils.rnn.pad_packed_sequence(encoded, batch_first=True, total_length=inputs.shape[1])[0]


class ElmoTagger(ElmoHeadModel):
    """The tagging head's layers over position vectors: dropout -> [BiLSTM] -> linear -> [CRF] (the paper's NER
    model), its loss and decoding; `ElmoForTokenClassification` tags words, the character tagger characters."""

    #: Whether the positions tagged are characters (read over the words they form) rather than the words.
    labels_characters = False

    def __init__(self, config: ElmoConfig, position_feature_size: int = 0):
        super().__init__(config)
        feature_size = self.feature_size + position_feature_size
        self.encoder = ElmoTaskBiLstm(feature_size, config.task_encoder_hidden_size, config.task_encoder_num_layers,
                                      config.classifier_dropout) if config.task_encoder == "bilstm" else None
        encoded_size = 2 * config.task_encoder_hidden_size if self.encoder is not None else feature_size
        self.classifier = nn.Linear(encoded_size, config.num_labels)
        self.crf = ElmoCrf(config.num_labels) if config.use_crf else None

    def save_pretrained(self, save_directory, *args, **kwargs):
        # Naming the pipeline of this file lets `pipeline(model=folder, trust_remote_code=True)` give entity spans
        # where hf-elmo is not installed.
        self.config.custom_pipelines = {TASK: {"impl": f"modeling_elmo.{ElmoTokenClassificationPipeline.__name__}",
                                               "pt": ["AutoModelForTokenClassification"], "type": "text"}}
        return super().save_pretrained(save_directory, *args, **kwargs)

    def tag(self, vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch):
        """Logits, loss and predictions of (B, positions, F) `vectors`, as an `ElmoTokenClassifierOutput`."""
        logits = self.classifier(self.dropout(self.encoder(vectors, mask)) if self.encoder is not None else vectors)
        loss = None if labels is None else tagging_loss(logits, labels, mask, self.crf, num_items_in_batch)
        with torch.no_grad():
            predictions = None if self.training else self.decode(logits, mask)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        output = ElmoTokenClassifierOutput(loss=loss, logits=logits, predictions=predictions,
                                           hidden_states=tuple(layers) if output_hidden_states else None)
        return output if (return_dict if return_dict is not None else self.config.return_dict) else output.to_tuple()

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Best tags (batch, positions) from `logits`, -100 at padding: Viterbi with a CRF, argmax otherwise."""
        if self.crf is not None:
            return self.crf.viterbi_decode(logits, mask)
        return logits.argmax(dim=-1).masked_fill(~mask.bool(), -100)

    def tag_probabilities(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(tag | sentence) per position, (batch, positions, num_labels): CRF marginals, or the softmax of `logits`."""
        if self.crf is not None:
            return self.crf.marginals(logits, mask)
        return torch.softmax(logits.float(), dim=-1) * mask.unsqueeze(-1)


class ElmoForTokenClassification(ElmoTagger):
    """ELMo with a word tagger, one label per word: learned mix [; own word vectors x_k] -> dropout -> [BiLSTM] ->
    linear -> [CRF] (`config.task_encoder`, `use_crf`, `task_token_features`, `freeze_elmo`)."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.post_init()

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        # AutoModelForTokenClassification maps every ElmoConfig here: a saved character tagger loads as what it is.
        architectures = getattr(kwargs.get("config"), "architectures", None) or ()
        if cls is ElmoForTokenClassification and "ElmoForCharacterTagging" in architectures:
            return ElmoForCharacterTagging.from_pretrained(*args, **kwargs)
        return super().from_pretrained(*args, **kwargs)

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, elmo_hidden_states=None, labels=None,
                output_hidden_states=None, return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args:
            input_ids, attention_mask, word_ids: as [`ElmoModel`] takes them.
            elmo_hidden_states (`torch.FloatTensor` of shape `(batch_size, num_lstm_layers + 1, num_words, 2P)`,
                *optional*): the frozen biLM's layers computed beforehand, instead of `input_ids` (which
                `config.task_token_features` still needs).
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*): Tag ids in
                `[0, num_labels)` or -100 (none); the loss is `tagging_loss`'s.
            output_hidden_states (`bool`, *optional*): also return the biLM layers (`config.output_hidden_states`,
                True by default, when not given).
            num_items_in_batch (`int`, *optional*): labelled words in the whole accumulated batch (`Trainer`).
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        vectors, mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        return self.tag(vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch)


# Characters tagged with a biLM of words: most Chinese NER sets label characters (MSRA, People's Daily, Weibo), while a
# biLM pretrained on segmented text reads words.
# A character's position in its word, in this order: the whole word, the first, a middle or the last character.
WORD_POSITIONS = ("S", "B", "M", "E")


def character_vectors(word_vectors: torch.Tensor, token_word_index: torch.Tensor, token_positions: torch.Tensor):
    """(batch, words, F) word vectors -> ((batch, characters, F + 4) character vectors, (batch, characters) mask):
    each character gets the vector of its word (`token_word_index`, -1 at padding) and the one-hot of its position in
    `WORD_POSITIONS` (`token_positions`); padding positions are zeros."""
    if token_word_index is None or token_positions is None:
        raise ValueError("ElmoForCharacterTagging: pass token_word_index and token_positions, one per character "
                         "(character_places makes them)")
    batch, shape = word_vectors.shape[0], token_word_index.shape
    if token_word_index.dim() != 2 or shape[0] != batch or token_positions.shape != shape:
        raise ValueError(f"token_word_index and token_positions must both be (batch={batch}, characters), got "
                         f"{tuple(token_word_index.shape)} and {tuple(token_positions.shape)}")
    token_word_index = token_word_index.to(word_vectors.device)
    mask = token_word_index >= 0
    index = token_word_index.clamp(min=0, max=max(word_vectors.shape[1] - 1, 0))
    vectors = word_vectors.gather(1, index.unsqueeze(-1).expand(-1, -1, word_vectors.shape[-1]))
    positions = nn.functional.one_hot(token_positions.to(mask.device).clamp(0, len(WORD_POSITIONS) - 1),
                                      len(WORD_POSITIONS))
    features = torch.cat([vectors, positions.to(vectors.dtype)], dim=-1)
    return features * mask.unsqueeze(-1).to(features.dtype), mask


class ElmoForCharacterTagging(ElmoTagger):
    """ELMo tagging characters, one label each: a character gets [x_k;] its word's learned mix, its S/B/M/E position
    [, with `config.task_character_features`, the head's x_k of the character read alone, which tells the characters
    of one word apart] -> dropout -> [BiLSTM] -> linear -> [CRF]."""

    labels_characters = True

    def __init__(self, config: ElmoConfig):
        extra = len(WORD_POSITIONS) + (config.projection_dim if config.task_character_features else 0)
        super().__init__(config, position_feature_size=extra)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, token_word_index=None, token_positions=None,
                character_input_ids=None, elmo_hidden_states=None, labels=None, output_hidden_states=None,
                return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args:
            input_ids, attention_mask, word_ids, elmo_hidden_states: of the sentence's *words*, as
                [`ElmoForTokenClassification`] takes them.
            token_word_index, token_positions (`torch.LongTensor` of shape `(batch_size, num_characters)`): each
                character's word (-1 at padding) and the index of its position in `WORD_POSITIONS`.
            character_input_ids (`torch.LongTensor` of shape `(batch_size, num_characters, max_characters_per_token)`):
                with `config.task_character_features`, the character ids of each character read as a word alone.
            labels (`torch.LongTensor` of shape `(batch_size, num_characters)`, *optional*): tag ids or -100.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        word_vectors, word_mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        vectors, mask = character_vectors(word_vectors, token_word_index, token_positions)
        if self.config.task_character_features:  # with a word embedding, a character reads its word's word id
            character_word_ids = None if word_ids is None else word_ids.gather(
                1, token_word_index.to(word_ids.device).clamp(min=0))
            own = self.own_word_vectors(character_input_ids, mask, character_word_ids, name="character_input_ids")
            vectors = torch.cat([vectors, self.dropout(own.to(vectors.dtype))], dim=-1)
        elif character_input_ids is not None:
            raise ValueError("character_input_ids are for taggers with config.task_character_features")
        return self.tag(vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch)


class ElmoForSequenceClassification(ElmoHeadModel):
    """ELMo with a sentence classifier: learned mix -> masked mean over words -> MLP (`classifier_hidden_size`)."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        hidden_size = config.classifier_hidden_size
        self.pre_classifier = nn.Linear(self.feature_size, hidden_size) if hidden_size else None
        self.classifier = nn.Linear(hidden_size or self.feature_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, word_ids=None, elmo_hidden_states=None, labels=None,
                output_hidden_states=None, return_dict=None, num_items_in_batch=None, **kwargs):
        r"""
        Args: as [`ElmoForTokenClassification`], except
            labels (`torch.Tensor`, *optional*): as transformers' classification heads read them, by
                `config.problem_type` (when unset: regression if `num_labels == 1`, else single-label for integer
                labels and multi-label for floating-point ones): class ids `(batch_size,)` (-100 leaves a sentence
                out), regression targets, or 0/1 rows `(batch_size, num_labels)`.
        """
        _refuse_unknown_arguments(type(self).__name__, kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        mixed, mask, layers = self.mixed_vectors(input_ids, attention_mask, word_ids, elmo_hidden_states)
        weights = mask.unsqueeze(-1).to(mixed.dtype)
        pooled = (mixed * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        if self.pre_classifier is not None:
            pooled = self.dropout(F.relu(self.pre_classifier(pooled)))
        logits = self.classifier(pooled)
        loss = None if labels is None else classification_loss(logits, labels, self.config.problem_type,
                                                               num_items_in_batch)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        output = SequenceClassifierOutput(loss=loss, logits=logits,
                                          hidden_states=tuple(layers) if output_hidden_states else None)
        return output if return_dict else output.to_tuple()


TASK = "elmo-token-classification"


# 6. The tagging pipeline: from tags to entity spans -------------------------------------------------------------------
def word_offsets(text: str, words: Sequence[str], lowercase: bool = False) -> list[tuple[int, int] | None]:
    """Character (start, end) of each word in `text`, searching left to right; None if a word is not found."""
    haystack = text.lower() if lowercase else text
    offsets: list[tuple[int, int] | None] = []
    position = 0
    for word in words:
        start = haystack.find(word, position)
        offsets.append(None if start < 0 else (start, start + len(word)))
        position = position if start < 0 else start + len(word)
    return offsets


def is_cjk_word(word: str) -> bool:
    return bool(word) and all("\u2e80" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" or ord(c) >= 0x20000 for c in word)


def unit_offsets(words_with_offsets: Sequence[tuple[str, int, int]], characters: bool) -> list[tuple[int, int]]:
    """The `(start, end)` in the text of each word (`tokenizer.words_with_offsets`) or, with `characters`, of each of
    their characters (the word's where lowercasing changed its length)."""
    if not characters:
        return [(start, end) for _, start, end in words_with_offsets]
    return [(start + i, start + i + 1) if len(word) == end - start else (start, end)
            for word, start, end in words_with_offsets for i in range(len(word))]


def entities_from_tags(words: Sequence[str], tags: Sequence[str], text: str | None = None,
                       scores: Sequence[float] | None = None, lowercase: bool = False,
                       joiner: str | None = None, offsets: Sequence[tuple[int, int]] | None = None) -> list[dict]:
    """Entity dicts `{entity, word, start, end, word_start, word_end, score}`: `start`/`end` are character offsets
    into `text` (None without text), each word's `offsets` when given (`unit_offsets`), else found by searching; `word`
    is the span's text from `text` when possible, else the words joined with `joiner` ("" between CJK words, " "
    otherwise)."""
    if offsets is None:
        offsets = word_offsets(text, words, lowercase) if text is not None else [None] * len(words)
    entities = []
    for entity, first, end in tag_spans(tags):
        start_offset, end_offset = offsets[first], offsets[end - 1]
        if start_offset is not None and end_offset is not None:
            start, stop = start_offset[0], end_offset[1]
            surface = text[start:stop]
        else:
            start = stop = None
            glue = joiner if joiner is not None else ("" if all(is_cjk_word(w) for w in words[first:end]) else " ")
            surface = glue.join(words[first:end])
        item = {"entity": entity, "word": surface, "start": start, "end": stop, "word_start": first, "word_end": end}
        if scores is not None:
            item["score"] = float(sum(scores[first:end]) / (end - first))
        entities.append(item)
    return entities


# The best tags of a batch, one input's result, and the pipeline
def tagged_mask(model, batch) -> torch.Tensor:
    """(batch, positions) bool: the words a tagger labels, or the characters a character tagger labels."""
    return batch["token_word_index"] >= 0 if model.labels_characters else batch["attention_mask"].bool()


@torch.no_grad()
def best_tags(model, batch: dict, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(batch, positions) ids of the best tags (Viterbi with a CRF) and, `with_scores`, each chosen tag's probability
    (CRF marginals or softmax), on the model's device; positions past each row's end hold padding. The model runs in
    eval mode."""
    was_training = model.training
    model.eval()
    try:
        batch = {key: value.to(model.device) for key, value in batch.items()}
        logits = model(**batch).logits
        mask = tagged_mask(model, batch)
        best = model.decode(logits, mask)
        if not with_scores:
            return best, None
        return best, model.tag_probabilities(logits, mask).gather(-1, best.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    finally:
        model.train(was_training)


def tagged_result(model, tokenizer, words: Sequence[str], best: torch.Tensor, scores: torch.Tensor | None,
                  text: str | None = None, offsets: Sequence[tuple[int, int]] | None = None) -> dict:
    """`{"text", "words", "tags", "entities"}` of one input from its row of `best_tags`; words cut from the model's
    inputs are tagged "O", so that the tags line up with the words."""
    count = min(len(words), best.shape[0])
    tags = [model.config.id2label[int(i)] for i in best[:count]] + ["O"] * (len(words) - count)
    row_scores = None if scores is None else scores[:count].tolist() + [0.0] * (len(words) - count)
    entities = entities_from_tags(words, tags, text=text, scores=row_scores, offsets=offsets,
                                  lowercase=getattr(tokenizer, "do_lower_case", False))
    return {"text": text, "words": list(words), "tags": tags, "entities": entities}


# Added to a character's word index between preprocess and _forward: the pipeline pads what it batches with 0, a word.
_WORD_INDEX_SHIFT = 1


class ElmoTokenClassificationPipeline(Pipeline):
    """Tags each input string with an ELMo tagger of words or of characters; returns a list of entity dicts
    `{entity, word, start, end, word_start, word_end, score}` per input (with `return_tags=True`:
    `{"words", "tags", "entities"}`). transformers' `token-classification` pipeline assumes sub-word tokenizers
    (offsets, special-token masks); ELMo tags whole words."""

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False

    def _sanitize_parameters(self, return_tags: bool | None = None, **kwargs):
        return {}, {}, ({} if return_tags is None else {"return_tags": return_tags})

    def preprocess(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"{TASK} takes strings, got {type(text).__name__}")
        found = self.tokenizer.words_with_offsets(text)
        words, offsets = [word for word, _, _ in found], unit_offsets(found, self.model.labels_characters)
        inputs = dict(self.tokenizer([words], is_split_into_words=True, return_tensors="pt"))  # [] too: one sentence
        if self.model.labels_characters:
            words, word_index, positions = character_places(words)
            inputs["token_word_index"] = torch.tensor([word_index], dtype=torch.long) + _WORD_INDEX_SHIFT
            inputs["token_positions"] = torch.tensor([positions], dtype=torch.long)
            if self.model.config.task_character_features:
                inputs["character_input_ids"] = self.tokenizer([words], is_split_into_words=True,
                                                               return_tensors="pt")["input_ids"]
        return {**inputs, "words": words, "text": text, "offsets": offsets}

    def _forward(self, model_inputs):
        words, text, offsets = model_inputs.pop("words"), model_inputs.pop("text"), model_inputs.pop("offsets")
        if "token_word_index" in model_inputs:
            model_inputs["token_word_index"] = model_inputs["token_word_index"] - _WORD_INDEX_SHIFT
        best, scores = best_tags(self.model, model_inputs)
        return {"best": best, "scores": scores, "words": words, "text": text, "offsets": offsets}

    def postprocess(self, model_outputs, return_tags: bool = False):
        result = tagged_result(self.model, self.tokenizer, model_outputs["words"], model_outputs["best"][0],
                               model_outputs["scores"][0], model_outputs["text"], model_outputs["offsets"])
        return {key: result[key] for key in ("words", "tags", "entities")} if return_tags else result["entities"]


__all__ = ["ElmoPreTrainedModel", "ElmoModel", "ElmoCrf", "ElmoHeadModel", "ElmoTagger", "ElmoTokenClassifierOutput",
           "ElmoForTokenClassification", "WORD_POSITIONS", "character_vectors", "ElmoForCharacterTagging",
           "ElmoForSequenceClassification", "TASK", "ElmoTokenClassificationPipeline", "best_tags",
           "entities_from_tags", "tagged_mask", "tagged_result", "unit_offsets", "word_offsets"]
