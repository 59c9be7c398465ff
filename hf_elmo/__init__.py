"""hf-elmo: ELMo deep contextualised word representations as a Hugging Face model family.

Importing this package registers the ELMo classes with the `Auto*` factories of transformers.
"""

import transformers
from transformers import AutoConfig, AutoTokenizer

from . import modeling_elmo
from .configuration_elmo import ElmoConfig
from .data_collator import ElmoDataCollator
from .modeling_elmo import (
    ElmoCrf,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoModelOutput,
    ElmoPreTrainedModel,
    ElmoScalarMix,
    ElmoTokenClassifierOutput,
)
from .tokenization_elmo import ElmoTokenizer
from .embedder import Embedder

__version__ = "0.1.0"

from pathlib import Path as _Path

#: Folder of the small Chinese ELMo shipped inside the package (works offline):
#: ``AutoModel.from_pretrained(hf_elmo.DEFAULT_MODEL)``.
DEFAULT_MODEL = str(_Path(__file__).resolve().parent / "pretrained" / "elmo-zh-small")

#: Auto class -> class name in modeling_elmo.py. Every class here that exists is registered with its
#: transformers Auto class and written to the `auto_map` of each saved or pushed folder, so that users
#: without hf-elmo load it with `trust_remote_code=True`. Add a head here when adding it to modeling_elmo.py.
AUTO_MODEL_CLASSES = {
    "AutoModel": "ElmoModel",
    "AutoModelForPreTraining": "ElmoForPreTraining",
    "AutoModelForSequenceClassification": "ElmoForSequenceClassification",
    "AutoModelForTokenClassification": "ElmoForTokenClassification",
}


def _register_auto_classes() -> None:
    AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
    AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
    # Saving then copies configuration_elmo.py / tokenization_elmo.py beside the weights (remote code).
    ElmoConfig.register_for_auto_class("AutoConfig")
    ElmoTokenizer.register_for_auto_class("AutoTokenizer")
    for auto_name, class_name in AUTO_MODEL_CLASSES.items():
        model_class = getattr(modeling_elmo, class_name, None)
        if model_class is None:
            continue
        getattr(transformers, auto_name).register(ElmoConfig, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_name)


_register_auto_classes()

__all__ = [
    "AUTO_MODEL_CLASSES",
    "DEFAULT_MODEL",
    "Embedder",
    "ElmoConfig",
    "ElmoCrf",
    "ElmoDataCollator",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoPreTrainedModel",
    "ElmoScalarMix",
    "ElmoTokenClassifierOutput",
    "ElmoTokenizer",
]

from .pipeline_elmo import register_pipeline as _register_pipeline  # noqa: E402

_register_pipeline()
