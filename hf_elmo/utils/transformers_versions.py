"""What hf-elmo does differently under transformers 4.x (4.57 is the oldest tested) and 5.x, in one place.

The modelling files run on both by their own small shims (they are remote code and import nothing of the package);
the package's other modules ask here. Reading the installed version imports nothing (`importlib.metadata`).
"""

from __future__ import annotations

from importlib.metadata import version

TRANSFORMERS_VERSION = version("transformers")
TRANSFORMERS_MAJOR = int(TRANSFORMERS_VERSION.split(".")[0])
#: The newest transformers hf-elmo is developed on; features that exist only there name it when refused.
TRANSFORMERS_5 = "transformers>=5.24,<6"


def transformers_5_needed(what: str) -> str | None:
    """The one-line refusal of `what` on the installed transformers 4.x, or None on 5.x."""
    if TRANSFORMERS_MAJOR >= 5:
        return None
    return f"{what} needs {TRANSFORMERS_5} (installed: transformers {TRANSFORMERS_VERSION}): pip install '{TRANSFORMERS_5}'"


def require_transformers_5(what: str, error: type[Exception] = RuntimeError) -> None:
    """Raise `error` with `transformers_5_needed(what)` on transformers 4.x."""
    message = transformers_5_needed(what)
    if message:
        raise error(message)


def safe_globals():
    """The Trainer's allowlist for `torch.load(weights_only=True)` of its checkpoints (numpy's RNG state)."""
    try:
        from transformers.trainer_pt_utils import safe_globals
    except ImportError:  # transformers 4.x keeps it in trainer.py
        from transformers.trainer import safe_globals
    return safe_globals()


def warmup_arguments(fraction: float) -> dict:
    """`TrainingArguments` keywords for a warmup over `fraction` of the steps: 5.x takes a float < 1 as
    `warmup_steps`, 4.x wants `warmup_ratio` (its `warmup_steps` must be an int)."""
    return {"warmup_steps": fraction} if TRANSFORMERS_MAJOR >= 5 else {"warmup_ratio": fraction}


__all__ = ["TRANSFORMERS_MAJOR", "TRANSFORMERS_VERSION", "require_transformers_5", "safe_globals", "transformers_5_needed",
           "warmup_arguments"]
