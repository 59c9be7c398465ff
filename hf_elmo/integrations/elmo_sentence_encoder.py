"""ELMo as the first module of a sentence-transformers model: texts in, one vector per word out.

This file is copied into the folders `hf_elmo.integrations.sentence_transformers.save_sentence_transformer` writes
and loads from there with `SentenceTransformer(folder, trust_remote_code=True)`, where hf-elmo need not be
installed: it imports only torch, transformers and sentence_transformers, and loads the ELMo model and tokenizer
through transformers' remote code (the modelling files saved beside the weights). A `Pooling` module after it
turns the word vectors into sentence vectors.
"""

from __future__ import annotations

import torch
from sentence_transformers.sentence_transformer.modules import InputModule
from transformers import AutoModel, AutoTokenizer

#: What `layers` may name besides a layer index; the same names and meanings as `hf_elmo.Embedder`.
LAYER_NAMES = ("average", "top", "mix")
#: `hf_elmo.Embedder.sentence_vectors`' default, so that both give the same sentence vectors at their defaults.
DEFAULT_LAYERS = "average"
# The model's own config.json sits in the same folder, so this module's settings need a file of their own.
CONFIG_FILE = "elmo_sentence_encoder.json"


def check_layers(layers, num_layers: int) -> str | int:
    """`layers` as this module uses it: one of LAYER_NAMES or a layer index in -num_layers..num_layers-1."""
    if isinstance(layers, bool) or not isinstance(layers, (str, int)):
        raise TypeError(f"layers must be one of {LAYER_NAMES} or a layer index, got {layers!r}")
    if isinstance(layers, str) and layers.lstrip("-").isdigit():
        layers = int(layers)
    if isinstance(layers, str) and layers not in LAYER_NAMES:
        raise ValueError(f"layers must be one of {LAYER_NAMES} or a layer index, got {layers!r}")
    if isinstance(layers, int) and not -num_layers <= layers < num_layers:
        raise ValueError(f"layer index {layers} out of range: this model has layers 0..{num_layers - 1}")
    return layers


class ElmoWordEmbeddings(InputModule):
    """Contextual word vectors of an ELMo model for sentence-transformers.

    Args:
        model: an ELMo encoder (`ElmoModel`, from hf-elmo or loaded as remote code).
        tokenizer: its `ElmoTokenizer`; raw texts are split into words by it (jieba for Chinese).
        layers: which vectors a word gets: `"average"` (default: the mean of the L + 1 layers), `"top"`, `"mix"`
            (the model's learned scalar mix) or a layer index (0 = character CNN, negative from the top).

    Writes `token_embeddings` (batch x words x 2P, zero at padding) and `attention_mask` (1 at words).
    """

    config_file_name = CONFIG_FILE
    config_keys = ["layers"]
    save_in_root = True

    def __init__(self, model, tokenizer, layers: str | int = DEFAULT_LAYERS):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.layers = check_layers(layers, model.config.num_lstm_layers + 1)
        if self.layers == "mix" and not model.config.num_output_representations:
            raise ValueError("layers='mix' needs a learned mix, but this model has none "
                             "(config.num_output_representations == 0)")

    def get_embedding_dimension(self) -> int:
        return 2 * self.model.config.projection_dim

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        texts = list(inputs)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"ELMo sentence vectors are made from single texts; input {index} is {text!r:.60}")
        if prompt:
            texts = self._prepend_prompt(texts, prompt)
        encoding = self.tokenizer(texts, padding=True, return_tensors="pt")
        features = {key: encoding[key] for key in ("input_ids", "attention_mask", "word_ids") if key in encoding}
        if features["input_ids"].shape[1] == 0:  # every text of the batch is empty: one padded position each
            features = {key: value.new_zeros((len(texts), 1) + tuple(value.shape[2:])) for key, value in features.items()}
        return features

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        inputs = {key: features[key] for key in ("input_ids", "attention_mask", "word_ids") if key in features}
        output = self.model(**inputs, output_hidden_states=True, return_dict=True)
        if self.layers == "average":
            vectors = torch.stack(output.hidden_states).mean(dim=0)
        elif self.layers == "top":
            vectors = output.hidden_states[-1]
        elif self.layers == "mix":
            vectors = output.mixes[:, 0]
        else:
            vectors = output.hidden_states[self.layers]
        features["token_embeddings"] = vectors
        features["attention_mask"] = output.mask.to(torch.long)
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.model.save_pretrained(output_path)
        self.tokenizer.save_pretrained(output_path)
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, trust_remote_code: bool = False, model_kwargs=None, processor_kwargs=None,
             **kwargs) -> ElmoWordEmbeddings:
        hub_kwargs = {"token": token, "cache_dir": cache_folder, "revision": revision,
                      "local_files_only": local_files_only, "trust_remote_code": trust_remote_code}
        if subfolder:
            hub_kwargs["subfolder"] = subfolder
        config = cls.load_config(model_name_or_path, subfolder=subfolder, token=token, cache_folder=cache_folder,
                                 revision=revision, local_files_only=local_files_only)
        model = AutoModel.from_pretrained(model_name_or_path, **hub_kwargs, **(model_kwargs or {}))
        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path, **hub_kwargs, **(processor_kwargs or {}))
        return cls(model.eval(), tokenizer, **config)
