"""hf-elmo: ELMo deep contextualised word representations as a Hugging Face model family.

Importing this package registers the ELMo classes with the `Auto*` factories of transformers (and the
`elmo-token-classification` pipeline). The `hf-elmo` command alone defers that, and every heavy import, until a
command runs, so that `hf-elmo --help` answers at once (transformers' Auto classes import torch).
"""

import os as _os
import sys as _sys
from importlib import import_module as _import_module
from pathlib import Path as _Path

__version__ = "0.1.0"

#: Folder of the small Chinese ELMo shipped inside the package (works offline):
#: ``AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL)``.
DEFAULT_MODEL = str(_Path(__file__).resolve().parent / "pretrained" / "elmo-zh-small")

#: Auto class -> class name in models/elmo/modeling_elmo.py. Every class here that exists is registered with its
#: transformers Auto class and written to the `auto_map` of each saved or pushed folder, so that users
#: without hf-elmo load it with `trust_remote_code=True`. Add a head here when adding it to modeling_elmo.py.
AUTO_MODEL_CLASSES = {
    "AutoModel": "ElmoModel",
    "AutoModelForSequenceClassification": "ElmoForSequenceClassification",
    "AutoModelForTokenClassification": "ElmoForTokenClassification",
}

# Public name -> the module that defines it; imported on first use.
_EXPORTS = {
    "ElmoBiLm": "models.elmo.bilm_elmo",
    "ElmoConfig": "models.elmo.configuration_elmo",
    "ElmoCharacterTaggingCollator": "finetuning.collator",
    "ElmoCrf": "models.elmo.modeling_elmo",
    "ElmoForCharacterTagging": "models.elmo.modeling_elmo",
    "ElmoDataCollator": "finetuning.collator",
    "ElmoForPreTraining": "pretraining.language_model",
    "ElmoForSequenceClassification": "models.elmo.modeling_elmo",
    "ElmoForTokenClassification": "models.elmo.modeling_elmo",
    "ElmoModel": "models.elmo.modeling_elmo",
    "ElmoModelOutput": "models.elmo.bilm_elmo",
    "ElmoPreTrainedModel": "models.elmo.modeling_elmo",
    "ElmoScalarMix": "models.elmo.bilm_elmo",
    "ElmoTokenClassifierOutput": "models.elmo.modeling_elmo",
    "ElmoTokenizer": "models.elmo.tokenization_elmo",
    "Embedder": "integrations.embedder",
}

_registered: set[str] = set()


def register_auto_classes(*, pretraining: bool = True) -> None:
    """Register the ELMo config, tokenizer, models and the `elmo-token-classification` pipeline with transformers
    (idempotent). `pretraining=False` leaves out the pretraining head of `AutoModelForPreTraining` (and its
    sampled-softmax kernels), which the `hf-elmo` commands that do not pretrain do not import."""
    if "models" not in _registered:
        _register_models()
        _registered.add("models")
    if pretraining and "pretraining" not in _registered:
        import transformers

        from .models.elmo.configuration_elmo import ElmoConfig
        from .pretraining.language_model import ElmoForPreTraining

        # The pretraining head is the package's (pretraining/language_model.py), not remote code: registered, not in
        # auto_map.
        transformers.AutoModelForPreTraining.register(ElmoConfig, ElmoForPreTraining, exist_ok=True)
        _registered.add("pretraining")


def _register_models() -> None:
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    from . import kernels  # noqa: F401  (registers the kernels: "auto" becomes every model's default)
    from .models.elmo import modeling_elmo
    from .models.elmo.configuration_elmo import ElmoConfig
    from .models.elmo.tokenization_elmo import ElmoTokenizer
    from .pipelines import register_pipeline
    from .utils.transformers_versions import TRANSFORMERS_MAJOR

    AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
    if TRANSFORMERS_MAJOR >= 5:
        AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
    else:  # transformers 4.x names a Python tokenizer the "slow" one
        AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoTokenizer, exist_ok=True)
    # Saving then copies configuration_elmo.py / tokenization_elmo.py beside the weights (remote code).
    ElmoConfig.register_for_auto_class("AutoConfig")
    ElmoTokenizer.register_for_auto_class("AutoTokenizer")
    for auto_name, class_name in AUTO_MODEL_CLASSES.items():
        model_class = getattr(modeling_elmo, class_name, None)
        if model_class is None:
            continue
        getattr(transformers, auto_name).register(ElmoConfig, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_name)
    # Written into the auto_map of the character taggers it saves (in place of the word tagger), so that remote-code
    # users load them with AutoModelForTokenClassification; the package itself picks the class from `architectures`.
    modeling_elmo.ElmoForCharacterTagging.register_for_auto_class("AutoModelForTokenClassification")
    register_pipeline()


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(_import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


def _started_as_the_command() -> bool:
    """Whether this process is the `hf-elmo` console script (its commands register what they need)."""
    program = _os.path.basename(getattr(_sys, "argv", [""])[0] or "")
    if program in ("hf-elmo", "hf-elmo.exe", "hf-elmo-script.py"):
        return True
    arguments = getattr(_sys, "orig_argv", [])  # the interpreter's own: `python -m hf_elmo.cli ...`
    return "-m" in arguments[:-1] and arguments[arguments.index("-m") + 1] == "hf_elmo.cli"


if not _started_as_the_command():
    register_auto_classes()

__all__ = ["AUTO_MODEL_CLASSES", "DEFAULT_MODEL", "register_auto_classes", *_EXPORTS]
