"""Raw text to entity spans with an ELMo tagger of words or of characters (modeling_elmo's `ElmoForTokenClassification`
/ `ElmoForCharacterTagging`): `ElmoTokenClassificationPipeline`, which works also where hf-elmo is not installed (a
saved tagger carries this file and names it in config.json's `custom_pipelines`); the package registers it as `TASK`.
It reads the model through its methods only and imports none of the modelling files, so that modeling_elmo.py, which
saves it beside a tagger, stays free of import cycles.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import Pipeline

from .text_elmo import character_places, split_tag, tag_spans

TASK = "elmo-token-classification"


# 1. From tags to entity spans --------------------------------------------------------------------------------------
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


# 2. Tagging: the best tags of a batch, one input's result, and the pipeline ------------------------------------------
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


__all__ = ["TASK", "ElmoTokenClassificationPipeline", "best_tags", "character_places", "entities_from_tags", "split_tag", "tag_spans", "tagged_mask",
           "tagged_result", "unit_offsets", "word_offsets"]
