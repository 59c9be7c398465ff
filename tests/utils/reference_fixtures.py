"""Loading the AllenNLP / bilm-tf reference fixtures (tests/fixtures, see their README.md files)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
from paths import FIXTURES

ALLENNLP = FIXTURES / "allennlp_elmo"
BILM_TF = FIXTURES / "bilm_tf" / "model"


@dataclass(frozen=True)
class ReferenceBiLM:
    name: str
    folder: Path
    sentences_file: str
    use_skip_connections: bool

    @property
    def options(self) -> Path:
        return self.folder / "options.json"

    @property
    def weights(self) -> Path:
        return self.folder / "lm_weights.hdf5"

    def batches(self) -> list[list[list[str]]]:
        """10 batches of 3 whitespace-tokenised sentences: batch i = [s[0][i], s[1][i], s[2][i]]."""
        sentences = json.loads((self.folder / self.sentences_file).read_text(encoding="utf-8"))
        return [[sentences[k][i].split() for k in range(3)] for i in range(10)]

    def expected_top_layer(self, row: int, batch: int) -> np.ndarray:
        """(words, 2P) expected top layer `[forward; backward]` of sentence `row` of `batch`."""
        with h5py.File(self.folder / f"lm_embeddings_{row}.hdf5", "r") as handle:
            both = handle[str(batch)][...]
        return np.concatenate([both[0], both[1]], axis=-1)


REFERENCES = [
    ReferenceBiLM("allennlp_elmo", ALLENNLP, "sentences.json", use_skip_connections=True),
    ReferenceBiLM("bilm_tf", BILM_TF, "lm_embeddings_sentences.json", use_skip_connections=False),
]


