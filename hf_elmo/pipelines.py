"""`pipeline("elmo-token-classification", model=...)`: raw text in, entity spans out.

The pipeline class is remote code (in `modeling_elmo.py`, which saved taggers name in their config.json); the package
registers it under the task name, so that the call works without `trust_remote_code`. A pipeline asked for without a
task for an hf-elmo folder is refused naming the tasks to pass (transformers would look the folder up on the Hub).
"""

from __future__ import annotations

import functools
import json
import os

from transformers import AutoModelForTokenClassification
from transformers.pipelines import PIPELINE_REGISTRY

from .models.elmo.modeling_elmo import TASK, ElmoTokenClassificationPipeline

# The task of each hf-elmo architecture (config.json's "architectures"), for `pipeline(task, model=folder)`.
TASKS = {
    "ElmoModel": "feature-extraction",
    "ElmoForPreTraining": "feature-extraction",
    "ElmoForTokenClassification": TASK,
    "ElmoForCharacterTagging": TASK,
    "ElmoForSequenceClassification": "text-classification",
}


def register_pipeline() -> None:
    """Make `pipeline("elmo-token-classification", ...)` available (idempotent), and refuse a pipeline without a
    task for an hf-elmo folder in one line naming the task."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=ElmoTokenClassificationPipeline, pt_model=AutoModelForTokenClassification, type="text"
        )
    _refuse_elmo_folders_without_task()


class TaskNeededError(RuntimeError):
    """`pipeline(model=folder)` for an hf-elmo folder: transformers can only infer a task from the Hub."""


def _elmo_architecture(model) -> str | None:
    """The architecture named in the config.json of a local hf-elmo folder `model` ("ElmoModel" when it names none),
    else None."""
    if not isinstance(model, (str, os.PathLike)) or not os.path.isdir(model):
        return None
    try:
        with open(os.path.join(model, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("model_type") != "elmo":
        return None
    architectures = config.get("architectures") or ["ElmoModel"]
    return architectures[0] if isinstance(architectures, list) and architectures else "ElmoModel"


def task_needed_message(model, architecture: str) -> str:
    task = TASKS.get(architecture, "feature-extraction")
    # A tagger's pipeline is the folder's own file (config.json's custom_pipelines), which transformers runs only
    # with trust_remote_code=True; with it, transformers finds the task there.
    trust = ", trust_remote_code=True" if task == TASK else ""
    return (f"pipeline() cannot infer the task of the hf-elmo model {os.fspath(model)} ({architecture}): name it, "
            f"e.g. pipeline({task!r}, model=...{trust}); hf-elmo's tasks are 'feature-extraction' (word vectors, any "
            f"model), '{TASK}' (a tagger's entity spans, with trust_remote_code=True) and 'text-classification' (a "
            "classifier's labels)")


def _refuse_elmo_folders_without_task() -> None:
    """Wrap transformers' `get_task` (which `pipeline()` calls when no task is given, to ask the Hub) so that a local
    hf-elmo folder gets `TaskNeededError` naming its task instead of a network or offline-mode error; every other
    model goes to the Hub as before."""
    from transformers import pipelines

    original = pipelines.get_task
    if getattr(original, "_hf_elmo", False):
        return

    @functools.wraps(original)
    def get_task(model, *args, **kwargs):
        architecture = _elmo_architecture(model)
        if architecture is not None:
            raise TaskNeededError(task_needed_message(model, architecture))
        return original(model, *args, **kwargs)

    get_task._hf_elmo = True
    pipelines.get_task = get_task


__all__ = ["ElmoTokenClassificationPipeline", "TASK", "TASKS", "TaskNeededError", "register_pipeline"]
