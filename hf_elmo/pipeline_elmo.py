"""`pipeline("elmo-token-classification", model=...)`: raw text in, entity spans out.

The stock `token-classification` pipeline assumes sub-word tokenizers (offsets, special-token masks);
ELMo tags whole words, so it gets a small pipeline of its own under a separate task name.
"""

from __future__ import annotations

import collections.abc

import torch
from transformers import AutoModelForTokenClassification, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY
from transformers.pipelines.pt_utils import PipelineDataset, PipelineIterator

from .tagging import entities_from_tags

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
        encoding = self.tokenizer(text, return_tensors="pt", return_words=True)
        words = encoding.pop("words")
        return {
            "input_ids": encoding["input_ids"],
            "attention_mask": encoding["attention_mask"],
            "words": words,
            "text": text,
        }

    def get_iterator(self, inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params):
        # The stock batching pads `input_ids` with the tokenizer's pad token, which a character tokenizer does
        # not have: a padded ELMo word is a row of zero character ids, which `_collate` adds itself.
        if isinstance(inputs, collections.abc.Sized):
            dataset = PipelineDataset(inputs, self.preprocess, preprocess_params)
        else:
            dataset = PipelineIterator(inputs, self.preprocess, preprocess_params)
            num_workers = min(num_workers, 1)
        # As in transformers, batch_size 1 passes each input on as it is and its outputs are not split again.
        collate = _single if batch_size == 1 else _collate
        loader = torch.utils.data.DataLoader(dataset, num_workers=num_workers, batch_size=batch_size, collate_fn=collate)
        model_iterator = PipelineIterator(loader, self.forward, forward_params, loader_batch_size=batch_size)
        return PipelineIterator(model_iterator, self.postprocess, postprocess_params)

    def _forward(self, model_inputs):
        words, text = model_inputs.pop("words"), model_inputs.pop("text")
        logits = self.model(**model_inputs).logits
        mask = model_inputs["attention_mask"].bool()
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


def _single(items: list[dict]) -> dict:
    return items[0]


def _collate(items: list[dict]) -> dict:
    """Preprocessed inputs (each a batch of one) -> one batch: words padded with all-zero character rows."""
    longest = max(item["input_ids"].shape[1] for item in items)
    input_ids = items[0]["input_ids"].new_zeros(len(items), longest, items[0]["input_ids"].shape[2])
    attention_mask = items[0]["attention_mask"].new_zeros(len(items), longest)
    for row, item in enumerate(items):
        length = item["input_ids"].shape[1]
        input_ids[row, :length] = item["input_ids"][0]
        attention_mask[row, :length] = item["attention_mask"][0]
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "words": [item["words"] for item in items],
        "text": [item["text"] for item in items],
    }


def register_pipeline() -> None:
    """Make `pipeline("elmo-token-classification", ...)` available (idempotent)."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=ElmoTokenClassificationPipeline, pt_model=AutoModelForTokenClassification, type="text"
        )


__all__ = ["ElmoTokenClassificationPipeline", "register_pipeline", "TASK"]
