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

from .elmo_word_characters import LEXICON_ROLES, WORD_POSITIONS
from .tagging import is_cjk_word


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
    words, word_index, positions = [], [], []
    for number, (first, end) in enumerate(group_tokens(tokens, segment)):
        words.append("".join(tokens[first:end]))
        for index in range(first, end):
            word_index.append(number)
            if end - first == 1:
                positions.append("S")
            elif index == first:
                positions.append("B")
            elif index == end - 1:
                positions.append("E")
            else:
                positions.append("M")
    return words, word_index, positions


def characters_as_words(example: dict, segment=None, keep_characters: bool = False, keep_bigrams: bool = False,
                        keep_lexicon: bool = False, lexicon=None) -> dict:
    """A character-labelled example (`"words"`: its characters, optional `"labels"` per character) -> what a tagger
    with `config.label_characters` reads: `"words"` the words they form, `"token_word_index"` and
    `"token_positions"` (indices into `WORD_POSITIONS`) per character; the labels stay per character.
    With `keep_characters` the characters stay too, as `"characters"` (for `config.task_character_features`);
    with `keep_bigrams` each character and the next one, as `"bigrams"` (for `config.task_bigram_features`);
    with `keep_lexicon` every dictionary word in the sentence, as `lexicon_matches` gives them (for
    `config.task_lexicon_features`; `lexicon`: as there)."""
    words, word_index, positions = words_and_positions(example["words"], segment)
    result = {**example, "words": words, "token_word_index": word_index,
              "token_positions": [WORD_POSITIONS.index(position) for position in positions]}
    if keep_characters:
        result["characters"] = list(example["words"])
    if keep_bigrams:
        result["bigrams"] = character_bigrams(example["words"])
    if keep_lexicon:
        result.update(lexicon_matches(example["words"], lexicon))
    return result


def character_bigrams(characters) -> list[str]:
    """Each character joined to the next one; the last character stays alone (no character follows it)."""
    characters = list(characters)
    return [first + second for first, second in zip(characters, characters[1:])] + characters[-1:]


# From this share of single Chinese characters among its tokens on, a tagging file is read as character-labelled.
CHARACTER_LABELLED_SHARE = 0.9


def single_character_share(sentences: Sequence) -> float:
    """The share of the tokens of `sentences` (each with `.words`, as `conll.TaggedSentence`) that are one Chinese
    character each: 1.0 for MSRA and most Chinese NER sets, 0.0 without tokens."""
    tokens = [token for sentence in sentences for token in sentence.words]
    return sum(len(token) == 1 and is_cjk_word(token) for token in tokens) / len(tokens) if tokens else 0.0


def jieba_lexicon() -> dict[str, int]:
    """jieba's dictionary (with any user words loaded into jieba): word -> count in jieba's corpus. Every prefix of
    a word is a key too, with count 0 (how jieba finds words; `lexicon_matches` uses it the same way)."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.dt.check_initialized()
    return jieba.dt.FREQ


def lexicon_from_counts(counts: dict[str, int]) -> dict[str, int]:
    """A lexicon `lexicon_matches` reads, from plain word counts (all > 0): the words with their counts, and every
    shorter prefix of them with count 0 unless it is a word too."""
    if any(not count > 0 for count in counts.values()):
        raise ValueError("lexicon_from_counts: every word needs a count > 0")
    lexicon = {word[:end]: 0 for word in counts for end in range(1, len(word))}
    lexicon.update(counts)
    return lexicon


def lexicon_matches(tokens: Sequence[str], lexicon: dict[str, int] | None = None) -> dict:
    """Every word of `lexicon` (default: `jieba_lexicon()`) that spans two or more whole tokens of the sentence,
    whichever way a segmenter would cut it (SoftLexicon, Ma et al. 2020: each character learns the words it
    begins, is inside of, and ends).

    Returns `"lexicon_words"` (each word found once), `"lexicon_weights"` (their counts in `lexicon`, the weights
    of the average over a character's words) and `"lexicon_matches"`: per token, the indices into
    `lexicon_words` of the words it begins, is inside of and ends (`LEXICON_ROLES`).
    `lexicon` maps words to counts > 0 and must hold every prefix of its words too, with count 0 unless it is a
    word itself (jieba's convention: the search stops at the first span that starts no word); `lexicon_from_counts`
    makes such a lexicon from plain word counts."""
    lexicon = jieba_lexicon() if lexicon is None else lexicon
    tokens = list(tokens)
    found: dict[str, int] = {}
    matches = [[[] for _ in LEXICON_ROLES] for _ in tokens]
    for first in range(len(tokens)):
        span = tokens[first]
        for last in range(first + 1, len(tokens)):
            span += tokens[last]
            if span not in lexicon:
                break  # not even the start of a word
            if lexicon[span] > 0:
                number = found.setdefault(span, len(found))
                matches[first][0].append(number)
                for inside in range(first + 1, last):
                    matches[inside][1].append(number)
                matches[last][2].append(number)
    return {"lexicon_words": list(found), "lexicon_weights": [float(lexicon[word]) for word in found],
            "lexicon_matches": matches}


__all__ = ["CHARACTER_LABELLED_SHARE", "WORD_POSITIONS", "LEXICON_ROLES", "character_bigrams", "characters_as_words", "group_tokens",
           "jieba_lexicon", "lexicon_from_counts", "lexicon_matches", "single_character_share", "words_and_positions"]
