"""Word vectors -> the vectors of the characters that form the words (`config.label_characters`).

A biLM pretrained on segmented words reads the words of a character-labelled sentence; the tagger then
labels every character with its word's vectors and the character's position in the word. Which word each
character belongs to (`token_word_index`) and where in it (`token_positions`) come with the batch
(the char_words module of the hf-elmo package computes them with the segmenter), so this module needs nothing but torch.
"""

from __future__ import annotations

import torch
from torch import nn

# A character's position in its word, in this order: the whole word, the first, a middle or the last character.
WORD_POSITIONS = ("S", "B", "M", "E")


def character_vectors(
    word_vectors: torch.Tensor, token_word_index: torch.Tensor | None, token_positions: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, words, F) word vectors -> ((batch, characters, F + 4) character vectors, (batch, characters) mask).

    `token_word_index` (batch, characters): the word each character belongs to, -1 at padding.
    `token_positions` (batch, characters): the index of the character's position in `WORD_POSITIONS`.
    Each character gets its word's vector and the one-hot of its position; padding positions are zeros.
    """
    if token_word_index is None or token_positions is None:
        raise ValueError(
            "config.label_characters: pass token_word_index and token_positions, one per character "
            "(char_words.characters_as_words of the hf-elmo package makes them)"
        )
    batch, words = word_vectors.shape[:2]
    if token_word_index.dim() != 2 or token_word_index.shape[0] != batch or token_positions.shape != token_word_index.shape:
        raise ValueError(
            f"token_word_index and token_positions must both be (batch={batch}, characters), got "
            f"{tuple(token_word_index.shape)} and {tuple(token_positions.shape)}"
        )
    token_word_index = token_word_index.to(word_vectors.device)
    mask = token_word_index >= 0
    if mask.any() and int(token_word_index.max()) >= words:
        raise ValueError(f"token_word_index points past the {words} words of the batch")
    index = token_word_index.clamp(min=0).unsqueeze(-1).expand(-1, -1, word_vectors.shape[-1])
    vectors = word_vectors.gather(1, index)
    positions = nn.functional.one_hot(token_positions.to(mask.device).clamp(0, len(WORD_POSITIONS) - 1),
                                      len(WORD_POSITIONS))
    features = torch.cat([vectors, positions.to(vectors.dtype)], dim=-1)
    return features * mask.unsqueeze(-1).to(features.dtype), mask


def tagged_vectors(
    label_characters: bool, word_vectors: torch.Tensor, word_mask: torch.Tensor, token_word_index, token_positions
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a tagger labels, with its mask: the characters' vectors with `config.label_characters`, else the words'."""
    if label_characters:
        return character_vectors(word_vectors, token_word_index, token_positions)
    if token_word_index is not None or token_positions is not None:
        raise ValueError("token_word_index / token_positions are for taggers with config.label_characters")
    return word_vectors, word_mask


__all__ = ["WORD_POSITIONS", "character_vectors", "tagged_vectors"]
