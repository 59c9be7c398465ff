"""`pipeline("elmo-token-classification", model=...)`: raw text in, entity spans out.

The pipeline class is remote code (`elmo_tagging.py`, which saved taggers name in their config.json); the package
registers it under the task name, so that the call works without `trust_remote_code`.
"""

from __future__ import annotations

from transformers import AutoModelForTokenClassification
from transformers.pipelines import PIPELINE_REGISTRY

from .elmo_tagging import TASK, ElmoTokenClassificationPipeline


def register_pipeline() -> None:
    """Make `pipeline("elmo-token-classification", ...)` available (idempotent)."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=ElmoTokenClassificationPipeline, pt_model=AutoModelForTokenClassification, type="text"
        )


__all__ = ["ElmoTokenClassificationPipeline", "register_pipeline", "TASK"]
