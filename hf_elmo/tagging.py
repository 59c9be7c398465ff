"""From word tags to entity spans, and tagging raw text with an [`ElmoForTokenClassification`] model.

Tag schemes: BIO (IOB2) is the main one; IOB1, BIOES/IOBES and BMES tags are read leniently the way
conlleval does (an `I-`/`M-`/`E-` tag after a different type starts a new entity; `S-`/`E-` close one).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def split_tag(tag: str) -> tuple[str, str | None]:
    """`"B-PER"` -> (`"B"`, `"PER"`); `"O"` (or anything without a known prefix) -> (`"O"`, None)."""
    prefix, sep, entity = tag.partition("-")
    if sep and prefix in ("B", "I", "E", "S", "M") and entity:
        return prefix, entity
    return "O", None


def tag_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entities as (type, first word, end word exclusive)."""
    spans: list[tuple[str, int, int]] = []
    current: list | None = None  # [type, start]
    for index, tag in enumerate(tags):
        prefix, entity = split_tag(tag)
        if current is not None and (entity != current[0] or prefix in ("B", "S") or entity is None):
            spans.append((current[0], current[1], index))
            current = None
        if entity is not None and current is None:
            current = [entity, index]
        if current is not None and prefix in ("E", "S"):
            spans.append((current[0], current[1], index + 1))
            current = None
    if current is not None:
        spans.append((current[0], current[1], len(tags)))
    return spans


def word_offsets(text: str, words: Sequence[str], lowercase: bool = False) -> list[tuple[int, int] | None]:
    """Character (start, end) of each word in `text`, searching left to right; None if a word is not found."""
    haystack = text.lower() if lowercase else text
    offsets: list[tuple[int, int] | None] = []
    position = 0
    for word in words:
        start = haystack.find(word, position)
        if start < 0:
            offsets.append(None)
            continue
        offsets.append((start, start + len(word)))
        position = start + len(word)
    return offsets


def entities_from_tags(
    words: Sequence[str],
    tags: Sequence[str],
    text: str | None = None,
    scores: Sequence[float] | None = None,
    lowercase: bool = False,
    joiner: str | None = None,
) -> list[dict]:
    """Entity dicts `{entity, word, start, end, word_start, word_end, score}`.

    `start`/`end` are character offsets into `text` (None without text). `word` is the span's text from
    `text` when possible, else the words joined with `joiner` ("" between CJK words, " " otherwise).
    """
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


def is_cjk_word(word: str) -> bool:
    return bool(word) and all(
        "\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or ord(ch) >= 0x20000 for ch in word
    )


def tagging_collator(model, tokenizer, max_words: int | None = None):
    """The collator of `model`'s batches: `ElmoCharacterTaggingCollator` for a character tagger, else
    `ElmoDataCollator`."""
    from .data_collator import ElmoCharacterTaggingCollator, ElmoDataCollator

    collator_class = ElmoCharacterTaggingCollator if model.labels_characters else ElmoDataCollator
    return collator_class(tokenizer, max_words=max_words)


def character_example(example: dict, config) -> dict:
    """A character-labelled example as an `ElmoForCharacterTagging` reads it: the words the characters
    form, each character's place in them, and the characters alone when its config asks for them."""
    from .char_words import characters_as_words

    return characters_as_words(example, keep_characters=config.task_character_features)


def character_batch(collator, sentences: Sequence[Sequence[str]], config) -> dict:
    """The inputs of an `ElmoForCharacterTagging` for sentences given as characters, made by `collator` (an
    `ElmoCharacterTaggingCollator`): the biLM reads the words the characters form, the tagger labels the characters."""
    return collator([character_example({"words": list(sentence)}, config) for sentence in sentences])


def characters_of_text(tokenizer, text: str) -> list[str]:
    """The characters a character tagger labels in raw text: those of the tokenizer's words."""
    return [character for word in tokenizer.tokenize(text) for character in word]


def tagged_mask(model, batch) -> torch.Tensor:
    """(batch, positions) bool: the words a tagger labels, or the characters a character tagger labels."""
    if model.labels_characters:
        return batch["token_word_index"] >= 0
    return batch["attention_mask"].bool()


# The one tagging predictor: `tag`, `hf_elmo.finetune.predict_tags` and the elmo-token-classification pipeline are
# these steps: the words of each input, the model's inputs for them, the best tags, the result of one input.


def words_to_tag(model, tokenizer, item: str | Sequence[str], is_split_into_words: bool = False) -> list[str]:
    """What a tagger labels in one input: the words of a text (its characters, for a character tagger), or the
    given tokens of a pre-split sentence."""
    if is_split_into_words:
        return list(item)
    if not isinstance(item, str):
        raise TypeError(f"texts to tag must be strings, got {type(item).__name__} (pre-split words: "
                        "is_split_into_words=True)")
    return characters_of_text(tokenizer, item) if model.labels_characters else tokenizer.tokenize(item)


def tagger_inputs(model, collator, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
    """The model inputs for sentences of what it labels (`words_to_tag`), made by `collator` (`tagging_collator`; one
    for many batches remembers each word's character ids)."""
    if model.labels_characters:
        return character_batch(collator, sentences, model.config)
    return collator([{"words": list(sentence)} for sentence in sentences])


@torch.no_grad()
def best_tags(model, batch: dict, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(batch, positions) ids of the best tags (Viterbi with a CRF) and, `with_scores`, each chosen tag's probability
    (CRF marginals or softmax); positions past each row's end hold padding. The model runs in eval mode."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        batch = {key: value.to(device) for key, value in batch.items()}
        logits = model(**batch).logits
        mask = tagged_mask(model, batch)
        best = model.decode(logits, mask)
        if not with_scores:
            return best.cpu(), None
        probabilities = model.tag_probabilities(logits, mask)
        chosen = probabilities.gather(-1, best.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return best.cpu(), chosen.cpu()
    finally:
        model.train(was_training)


def tagged_result(model, tokenizer, words: Sequence[str], best: torch.Tensor, scores: torch.Tensor | None,
                  text: str | None = None) -> dict:
    """`{"text", "words", "tags", "entities"}` of one input from its row of `best_tags`; words cut from the model's
    inputs (`max_words`) are tagged "O", so that the tags line up with the words."""
    count = min(len(words), best.shape[0])
    id2label = model.config.id2label
    tags = [id2label[int(i)] for i in best[:count]] + ["O"] * (len(words) - count)
    row_scores = None if scores is None else scores[:count].tolist() + [0.0] * (len(words) - count)
    entities = entities_from_tags(words, tags, text=text, scores=row_scores,
                                  lowercase=getattr(tokenizer, "do_lower_case", False))
    return {"text": text, "words": list(words), "tags": tags, "entities": entities}


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
    sentences = [words_to_tag(model, tokenizer, item, is_split_into_words) for item in inputs]
    collator = tagging_collator(model, tokenizer, max_words)  # one for all batches: it remembers character ids
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results: list[dict | None] = [None] * len(sentences)
    for begin in range(0, len(order), batch_size):
        chunk = order[begin : begin + batch_size]
        best, scores = best_tags(model, tagger_inputs(model, collator, [sentences[i] for i in chunk]), with_scores)
        for row, index in enumerate(chunk):
            text = None if is_split_into_words else inputs[index]
            results[index] = tagged_result(model, tokenizer, sentences[index], best[row],
                                           None if scores is None else scores[row], text)
    return results


__all__ = ["split_tag", "tag_spans", "word_offsets", "entities_from_tags", "tag", "best_tags", "character_batch",
           "character_example", "tagged_mask", "tagged_result", "tagger_inputs", "tagging_collator",
           "words_to_tag"]
