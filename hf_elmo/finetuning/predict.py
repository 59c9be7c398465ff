"""Tagging raw text or pre-split sentences with an ELMo tagger, in batches sorted by length.

The steps every tagging path shares (from tags to entity spans, the best tags of a batch, one input's result) and
the `elmo-token-classification` pipeline are remote code, in `modeling_elmo.py` (beside the taggers); they are imported
here too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models.elmo.modeling_elmo import (  # noqa: F401  (re-exported: the spans and the predictor's steps are remote code)
    best_tags,
    entities_from_tags,
    tagged_mask,
    tagged_result,
    unit_offsets,
    word_offsets,
)
from ..models.elmo.text_elmo import character_places, split_tag, tag_spans  # noqa: F401  (re-exported)


def tagging_collator(model, tokenizer, max_words: int | None = None):
    """The collator of `model`'s batches: `ElmoCharacterTaggingCollator` for a character tagger, else
    `ElmoDataCollator`."""
    from .collator import ElmoCharacterTaggingCollator, ElmoDataCollator

    collator_class = ElmoCharacterTaggingCollator if model.labels_characters else ElmoDataCollator
    return collator_class(tokenizer, max_words=max_words)


def character_example(example: dict, config) -> dict:
    """A character-labelled example as an `ElmoForCharacterTagging` reads it: the words the characters
    form, each character's place in them, and the characters alone when its config asks for them."""
    from .character_words import characters_as_words

    return characters_as_words(example, keep_characters=config.task_character_features)


# The one tagging predictor: `tag`, `hf_elmo.finetuning.run.predict_tags` and the elmo-token-classification pipeline are
# these steps: what each input labels, the model's inputs for them, `best_tags`, `tagged_result` (modeling_elmo.py).


def tagging_example(model, tokenizer, item: str | Sequence[str], is_split_into_words: bool = False):
    """(what a tagger labels in one input, the example its collator takes, each labelled unit's `(start, end)` in the
    text or None for pre-split input). A text's words come from the tokenizer and a character tagger labels their
    characters, each kept in its word (as the pipeline reads text); pre-split characters are grouped into the words
    jieba finds in them."""
    if is_split_into_words:
        units = list(item)
        return units, (character_example({"words": units}, model.config) if model.labels_characters
                       else {"words": units}), None
    if not isinstance(item, str):
        raise TypeError(f"texts to tag must be strings, got {type(item).__name__} (pre-split words: "
                        "is_split_into_words=True)")
    found = tokenizer.words_with_offsets(item)
    words, offsets = [word for word, _, _ in found], unit_offsets(found, model.labels_characters)
    if not model.labels_characters:
        return words, {"words": words}, offsets
    characters, word_index, positions = character_places(words)
    example = {"words": words, "token_word_index": word_index, "token_positions": positions}
    if model.config.task_character_features:
        example["characters"] = characters
    return characters, example, offsets


def tag(
    model,
    tokenizer,
    inputs: str | Sequence[str] | Sequence[Sequence[str]],
    is_split_into_words: bool = False,
    batch_size: int = 32,
    with_scores: bool = True,
    max_words: int | None = None,
) -> list[dict]:
    """Tag raw text (split into words by the tokenizer, Chinese included) or pre-split sentences.

    Returns one dict per sentence: `{"text", "words", "tags", "entities"}` (see [`entities_from_tags`];
    `score` is the mean probability of the chosen tags: CRF marginals or softmax; without `with_scores`, none).
    An input without words (an empty or blank string, an empty word list) gets a result with empty lists, so results
    line up with inputs. Sentences are batched by length (fewer padded positions); `max_words` cuts what the model
    reads, and the words past it are tagged "O".
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if isinstance(inputs, str):
        inputs = [inputs]
    elif is_split_into_words and inputs and all(isinstance(word, str) for word in inputs):
        inputs = [list(inputs)]
    inputs = list(inputs)
    sentences, examples, offsets = [], [], []
    for item in inputs:
        units, example, places = tagging_example(model, tokenizer, item, is_split_into_words)
        sentences.append(units)
        examples.append(example)
        offsets.append(places)
    collator = tagging_collator(model, tokenizer, max_words)  # one for all batches: it remembers character ids
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results: list[dict | None] = [None] * len(sentences)
    for begin in range(0, len(order), batch_size):
        chunk = order[begin : begin + batch_size]
        best, scores = best_tags(model, collator([examples[i] for i in chunk]), with_scores)
        # One copy to the host per batch: each result reads its row tag by tag.
        best, scores = best.cpu(), None if scores is None else scores.cpu()
        for row, index in enumerate(chunk):
            text = None if is_split_into_words else inputs[index]
            results[index] = tagged_result(model, tokenizer, sentences[index], best[row],
                                           None if scores is None else scores[row], text, offsets[index])
    return results


__all__ = ["best_tags", "character_example", "entities_from_tags", "split_tag", "tag", "tag_spans", "tagged_mask",
           "tagged_result", "tagging_collator", "tagging_example", "word_offsets"]
