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
# What a dictionary word of two or more characters is to a character it covers: begun, gone through, ended by it.
LEXICON_ROLES = ("B", "M", "E")


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


def lexicon_vectors(
    word_vectors: torch.Tensor, weights: torch.Tensor, match_index: torch.Tensor, num_characters: int | None = None
) -> torch.Tensor:
    """Each character's dictionary words pooled per role (SoftLexicon, Ma et al. 2020):
    (batch, characters, len(LEXICON_ROLES) * F).

    `word_vectors` (batch, words, F): a vector per dictionary word found in the sentence; `weights`
    (batch, words): each word's weight (its count in the dictionary), 0 at padding; `match_index`
    (batch, characters, roles, matches): the words each character begins / is inside of / ends, -1 for none
    (`num_characters`, if given: the characters there must be).
    A role's vector is the weighted sum of its words, divided by the total weight of all the character's words
    and times the number of roles; a character with no words gets zeros."""
    batch, words, size = word_vectors.shape
    if weights.shape != (batch, words):
        raise ValueError(f"lexicon_weights must be (batch={batch}, words={words}), got {tuple(weights.shape)}")
    characters = match_index.shape[1] if num_characters is None else num_characters
    if match_index.dim() != 4 or match_index.shape[:3] != (batch, characters, len(LEXICON_ROLES)):
        raise ValueError(f"lexicon_match_index must be (batch={batch}, characters={characters}, "
                         f"{len(LEXICON_ROLES)} roles, matches), got {tuple(match_index.shape)}")
    match_index = match_index.to(word_vectors.device)
    if match_index.numel() and (int(match_index.max()) >= words or int(match_index.min()) < -1):
        raise ValueError(f"lexicon_match_index must point at the {words} lexicon words of the batch (or be -1)")
    found = match_index >= 0
    flat = (match_index.clamp(min=0) + words * torch.arange(batch, device=match_index.device).view(-1, 1, 1, 1))
    # The shares in float32: dictionary counts (up to millions) overflow half precision.
    match_weights = weights.float().reshape(-1)[flat] * found
    total = match_weights.sum(dim=(2, 3), keepdim=True).clamp(min=torch.finfo(torch.float32).tiny)
    shares = (match_weights * (len(LEXICON_ROLES) / total)).to(word_vectors.dtype)
    return torch.einsum("bcrm,bcrmf->bcrf", shares, word_vectors.reshape(-1, size)[flat]).flatten(2)


__all__ = ["LEXICON_ROLES", "WORD_POSITIONS", "character_vectors", "lexicon_vectors", "tagged_vectors"]
