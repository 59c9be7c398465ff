"""`pipeline("elmo-token-classification", model=...)`: raw text in, entity spans out.

The stock `token-classification` pipeline assumes sub-word tokenizers (offsets, special-token masks);
ELMo tags whole words, so it gets a small pipeline of its own under a separate task name.
"""

from __future__ import annotations

from transformers import AutoModelForTokenClassification, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

from .data_collator import ElmoDataCollator
from .tagging import character_batch, characters_of_text, entities_from_tags, tagged_mask

TASK = "elmo-token-classification"


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
        if self.model.config.label_characters:
            words = characters_of_text(self.tokenizer, text)
            encoding = character_batch(ElmoDataCollator(self.tokenizer), [words], self.model.config)
        else:
            encoding = self.tokenizer(text, return_tensors="pt", return_words=True)
            words = encoding.pop("words")
        return {**encoding, "words": words, "text": text}  # `word_ids` too, for models with a word embedding

    def _forward(self, model_inputs):
        words, text = model_inputs.pop("words"), model_inputs.pop("text")
        logits = self.model(**model_inputs).logits
        mask = tagged_mask(self.model, model_inputs)
        best = self.model.decode(logits, mask)
        probabilities = self.model.tag_probabilities(logits, mask)
        chosen = probabilities.gather(-1, best.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return {"best": best, "scores": chosen, "words": words, "text": text}  # (batch, words) tensors, lists

    def postprocess(self, model_outputs, return_tags: bool = False):
        words = model_outputs["words"]
        id2label = self.model.config.id2label
        tags = [id2label[int(i)] for i in model_outputs["best"][0, : len(words)]]
        entities = entities_from_tags(
            words,
            tags,
            text=model_outputs["text"],
            scores=model_outputs["scores"][0, : len(words)].tolist(),
            lowercase=getattr(self.tokenizer, "do_lower_case", False),
        )
        if return_tags:
            return {"words": list(words), "tags": tags, "entities": entities}
        return entities


def register_pipeline() -> None:
    """Make `pipeline("elmo-token-classification", ...)` available (idempotent)."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=ElmoTokenClassificationPipeline, pt_model=AutoModelForTokenClassification, type="text"
        )


__all__ = ["ElmoTokenClassificationPipeline", "register_pipeline", "TASK"]
