"""Character-labelled data read as the words the biLM was trained on.

The biLM of elmo-zh-small was pretrained on jieba words, while character-labelled NER sets (MSRA, most
Chinese NER data) give one character per token. Fed one character a word, the biLM sees inputs it never
saw in pretraining. Here the characters of a sentence are grouped into jieba words; the biLM runs over
those words, and each character gets its word's vectors plus its position in the word (B/M/E/S), so the
tagger still labels every character.

Entities that cross a jieba word boundary (e.g. jieba cuts 张三在 / 北京 for 张三 在北京): labels stay per
character, so nothing is lost or moved; the characters of one word share the word's vectors and are told
apart only by their position tag. No tag is ever mapped to words and back.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models.elmo.modeling_elmo import WORD_POSITIONS
from ..models.elmo.text_elmo import character_places


def group_tokens(tokens: Sequence[str], segment=None) -> list[tuple[int, int]]:
    """(first token, end token exclusive) of each word of ``"".join(tokens)`` as `segment` (jieba) cuts it.

    A word boundary is kept only where it falls between two tokens; a jieba word that ends inside a token
    is extended to the token's end, so every token belongs to exactly one word.
    """
    if segment is None:
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)
        segment = jieba.lcut
    token_ends, end = [], 0
    for token in tokens:
        end += len(token)
        token_ends.append(end)
    word_ends, end = set(), 0
    for word in segment("".join(tokens)):
        end += len(word)
        word_ends.add(end)
    groups, first = [], 0
    for index, token_end in enumerate(token_ends):
        if token_end in word_ends or index == len(tokens) - 1:
            groups.append((first, index + 1))
            first = index + 1
    return groups


def words_and_positions(tokens: Sequence[str], segment=None) -> tuple[list[str], list[int], list[str]]:
    """The words the biLM reads, the word index of each token, and each token's position in its word."""
    groups = [tokens[first:end] for first, end in group_tokens(tokens, segment)]
    _, word_index, positions = character_places(groups)  # places of the tokens in their groups
    return ["".join(group) for group in groups], word_index, [WORD_POSITIONS[position] for position in positions]


def characters_as_words(example: dict, segment=None, keep_characters: bool = False) -> dict:
    """A character-labelled example (`"words"`: its characters, optional `"labels"` per character) -> what a tagger
    of characters reads: `"words"` the words they form, `"token_word_index"` and `"token_positions"` (indices into
    `WORD_POSITIONS`) per character; the labels stay per character. With `keep_characters` the characters stay
    too, as `"characters"` (for `config.task_character_features`)."""
    words, word_index, positions = words_and_positions(example["words"], segment)
    result = {**example, "words": words, "token_word_index": word_index,
              "token_positions": [WORD_POSITIONS.index(position) for position in positions]}
    if keep_characters:
        result["characters"] = list(example["words"])
    return result


# From this share of one-character tokens on, a tagging file is read as character-labelled. The shape decides, not
# the script: social-media NER sets labelled one character a line hold letters, digits, punctuation and emoji
# beside Chinese characters, while a file of words has most of its tokens longer than one character.
CHARACTER_LABELLED_SHARE = 0.9


def is_one_character(token: str) -> bool:
    """Whether `token` is one character as a reader sees it (a grapheme cluster), in any script: a letter with its
    accents, a digit, a punctuation mark, an emoji with its skin tone or joined parts."""
    import regex

    return regex.fullmatch(r"\X", token) is not None


def single_character_share(sentences: Sequence) -> float:
    """The share of the tokens of `sentences` (each with `.words`, as `conll.TaggedSentence`) that are one character
    each (`is_one_character`): 1.0 for MSRA and most Chinese NER sets, 0.0 without tokens."""
    tokens = [token for sentence in sentences for token in sentence.words]
    return sum(map(is_one_character, tokens)) / len(tokens) if tokens else 0.0


def character_labelled_decision(sentences: Sequence) -> tuple[bool, str]:
    """Whether tagging data labels one character a line, and the sentence that says so with the figure behind it."""
    share = single_character_share(sentences)
    if share >= CHARACTER_LABELLED_SHARE:
        return True, (f"the training data is read as character-labelled: {share:.1%} of its tokens are one character "
                      f"each (from {CHARACTER_LABELLED_SHARE:.0%} on); --no-label-characters reads each token as a "
                      "word")
    return False, (f"the training data is read as words: {share:.1%} of its tokens are one character each "
                   f"(character-labelled from {CHARACTER_LABELLED_SHARE:.0%} on); pass --label-characters if it labels "
                   "one character a line")


__all__ = ["CHARACTER_LABELLED_SHARE", "WORD_POSITIONS", "character_labelled_decision", "characters_as_words",
           "group_tokens", "is_one_character", "single_character_share",
           "words_and_positions"]
