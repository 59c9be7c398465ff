"""`pipeline("elmo-token-classification", model=...)`: raw text in, entity spans out.

The stock `token-classification` pipeline assumes sub-word tokenizers (offsets, special-token masks);
ELMo tags whole words, so it gets a small pipeline of its own under a separate task name.
"""

from __future__ import annotations

from transformers import AutoModelForTokenClassification, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

from .tagging import best_tags, tagged_result, tagger_inputs, tagging_collator, words_to_tag

TASK = "elmo-token-classification"
# Added to a character's word index between preprocess and _forward, so that the batch padding is "no word".
_WORD_INDEX_SHIFT = 1


class ElmoTokenClassificationPipeline(Pipeline):
    """Tags each input string; returns a list of entity dicts
    `{entity, word, start, end, word_start, word_end, score}` per input
    (with `return_tags=True`: `{"words", "tags", "entities"}`)."""

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False

    def _sanitize_parameters(self, return_tags: bool | None = None, **kwargs):
        postprocess = {} if return_tags is None else {"return_tags": return_tags}
        return {}, {}, postprocess

    def preprocess(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"{TASK} takes strings, got {type(text).__name__}")
        if "_collator" not in self.__dict__:  # one for every input: it remembers each word's character ids
            self._collator = tagging_collator(self.model, self.tokenizer)
        words = words_to_tag(self.model, self.tokenizer, text)
        inputs = tagger_inputs(self.model, self._collator, [words])
        if "token_word_index" in inputs:  # the pipeline pads what it batches with 0, a word: -1 (none) must stay -1
            inputs["token_word_index"] = inputs["token_word_index"] + _WORD_INDEX_SHIFT
        return {**inputs, "words": words, "text": text}

    def _forward(self, model_inputs):
        words, text = model_inputs.pop("words"), model_inputs.pop("text")
        if "token_word_index" in model_inputs:
            model_inputs["token_word_index"] = model_inputs["token_word_index"] - _WORD_INDEX_SHIFT
        best, scores = best_tags(self.model, model_inputs)
        return {"best": best, "scores": scores, "words": words, "text": text}  # (batch, words) tensors, lists

    def postprocess(self, model_outputs, return_tags: bool = False):
        result = tagged_result(self.model, self.tokenizer, model_outputs["words"], model_outputs["best"][0],
                               model_outputs["scores"][0], model_outputs["text"])
        if return_tags:
            return {key: result[key] for key in ("words", "tags", "entities")}
        return result["entities"]


def register_pipeline() -> None:
    """Make `pipeline("elmo-token-classification", ...)` available (idempotent)."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=ElmoTokenClassificationPipeline, pt_model=AutoModelForTokenClassification, type="text"
        )


__all__ = ["ElmoTokenClassificationPipeline", "register_pipeline", "TASK"]
