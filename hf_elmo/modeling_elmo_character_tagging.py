"""Tagging characters with a biLM of words: `ElmoForCharacterTagging`.

Most Chinese NER sets label characters (MSRA, People's Daily, Weibo), while a biLM pretrained on segmented text
reads words. The biLM reads the sentence's words; each character gets its word's vectors, its position in the word
(single, begin, middle, end) and, with `config.task_character_features`, the head's own x_k of the character read
alone (the word's vectors and the position cannot tell the characters of one word apart, this can). Which word
each character belongs to and where in it come with the batch (`token_word_index`, `token_positions`: the hf-elmo
package's `char_words` makes them with the segmenter), so this file needs nothing but torch.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration_elmo import ElmoConfig
from .modeling_elmo import ElmoTagger, _refuse_unknown_arguments

# A character's position in its word, in this order: the whole word, the first, a middle or the last character.
WORD_POSITIONS = ("S", "B", "M", "E")


def character_vectors(word_vectors: torch.Tensor, token_word_index: torch.Tensor, token_positions: torch.Tensor):
    """(batch, words, F) word vectors -> ((batch, characters, F + 4) character vectors, (batch, characters) mask).

    `token_word_index` (batch, characters): the word each character belongs to, -1 at padding; `token_positions`
    (batch, characters): the index of the character's position in `WORD_POSITIONS`. Each character gets its word's
    vector and the one-hot of its position; padding positions are zeros."""
    if token_word_index is None or token_positions is None:
        raise ValueError("ElmoForCharacterTagging: pass token_word_index and token_positions, one per character "
                         "(char_words.characters_as_words of the hf-elmo package makes them)")
    batch = word_vectors.shape[0]
    if token_word_index.dim() != 2 or token_word_index.shape[0] != batch or token_positions.shape != token_word_index.shape:
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
    """ELMo tagging characters: each character gets [x_k;] its word's learned mix, its S/B/M/E position [, the head's
    x_k of the character alone] -> dropout -> [BiLSTM] -> linear -> [CRF]. One label per character."""

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
        if self.config.task_character_features:
            own = self.own_word_vectors(character_input_ids, mask, name="character_input_ids")
            vectors = torch.cat([vectors, self.dropout(own.to(vectors.dtype))], dim=-1)
        elif character_input_ids is not None:
            raise ValueError("character_input_ids are for taggers with config.task_character_features")
        return self.tag(vectors, mask, labels, layers, output_hidden_states, return_dict, num_items_in_batch)


__all__ = ["WORD_POSITIONS", "ElmoForCharacterTagging", "character_vectors"]
