"""hf-elmo: ELMo deep contextualised word representations as a Hugging Face model family.

Importing this package registers the ELMo classes with the `Auto*` factories of transformers.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

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

AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
AutoModelForTokenClassification.register(ElmoConfig, ElmoForTokenClassification, exist_ok=True)
AutoModelForSequenceClassification.register(ElmoConfig, ElmoForSequenceClassification, exist_ok=True)
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)

__all__ = [
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
