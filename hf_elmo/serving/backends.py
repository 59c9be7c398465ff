"""What `hf-elmo serve` runs a model on: onnxruntime (the export's own client, `elmo_client.py`) or PyTorch (the
package's Python API: `Embedder`, `tagging.tag`, `finetune.classify`). Both give the same answers in the same shapes:

* `embed(texts)` -> (vectors (texts, 2P) float32, the words of each text): `Embedder.sentence_vectors`;
* `predict(texts)` -> one dict per text: a tagger's `{"words", "offsets", "tags", "entities"}` or a sentence
  classifier's `{"words", "label", "score", "scores"}`.

Each backend is called from one worker thread at a time (the service's batcher), never concurrently.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

BACKENDS = ("auto", "onnx", "torch")
TAGGER_KINDS = ("token-classification", "character-tagging")


def export_folder(name: str) -> Path | None:
    """`name` as an `hf-elmo export --format onnx` folder (it holds client.json and model.onnx), else None."""
    folder = Path(name)
    return folder if (folder / "client.json").is_file() and (folder / "model.onnx").is_file() else None


def onnx_available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class OnnxBackend:
    """An export folder run by its own client (the file the export wrote beside the graph is the package's
    hf_elmo/convert/onnx/client.py; the package's copy runs here)."""

    name = "onnx"

    def __init__(self, folder, threads: int | None = None, batch_size: int = 32, source: str | None = None,
                 layers: str | int = "average", cleanup: str | None = None):
        import onnxruntime

        from ..convert.onnx.client import ElmoClient

        options = onnxruntime.SessionOptions()
        # The compute threads sleep between batches instead of spinning: the event loop that parses the next
        # requests (and forms the next batch) needs the cores while a batch is being put together.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.client = ElmoClient(folder, threads=threads, batch_size=batch_size, session_options=options)
        self.kind, self.labels, self.dim = self.client.kind, self.client.labels, self.client.dim
        self.model = source or self.client.config.get("source") or str(folder)
        self.layers = self.client._check_layers(layers)  # refused at start, not in every request
        if layers == "mix" and "mixes" not in self.client._output_names:
            raise ValueError(f"--layers mix: {self.model} has no learned mix of its encoder (a task model mixes in "
                             "its head); use average, top or a layer index")
        self._cleanup = cleanup

    def embed(self, texts: list[str]):
        return self.client.sentence_vectors(texts, layers=self.layers, return_words=True)

    def predict(self, texts: list[str]) -> list[dict]:
        results = self.client.predict(texts)
        keys = ("words", "offsets", "tags", "entities") if self.kind in TAGGER_KINDS else (
            "words", "label", "score", "scores")
        return [{key: result[key] for key in keys} for result in results]

    def close(self) -> None:
        if self._cleanup:
            shutil.rmtree(self._cleanup, ignore_errors=True)


class TorchBackend:
    """A model folder or Hub id run by PyTorch through the package's Python API."""

    name = "torch"

    def __init__(self, model: str, threads: int | None = None, batch_size: int = 32, layers: str | int = "average"):
        import torch

        from .. import register_auto_classes
        from ..convert.onnx.export import _architecture_class
        from ..convert.onnx.heads import KINDS
        from ..integrations.embedder import Embedder
        from ..loading import load_model_and_tokenizer, resolve_model_name

        register_auto_classes()
        if threads:
            torch.set_num_threads(int(threads))
        name = resolve_model_name(model)
        loaded, tokenizer, self.model = load_model_and_tokenizer(name, model_class=_architecture_class(name))
        self.kind = KINDS[type(loaded).__name__]
        self.task_model = loaded.eval()
        self.tokenizer = tokenizer
        biLM = loaded if self.kind == "encoder" else loaded.elmo
        self.embedder = Embedder(biLM, tokenizer=tokenizer, device="cpu", batch_size=batch_size, progress=False)
        self.batch_size = batch_size
        self.dim = self.embedder.dim
        self.labels = None if self.kind == "encoder" else [str(loaded.config.id2label[i])
                                                         for i in range(loaded.config.num_labels)]
        self.layers = layers

    def embed(self, texts: list[str]):
        words = self.embedder.tokenize(list(texts))
        vectors = self.embedder.sentence_vectors(words, layers=self.layers) if words else None
        if vectors is None:
            import numpy as np

            vectors = np.zeros((0, self.dim), np.float32)
        return vectors, words

    def predict(self, texts: list[str]) -> list[dict]:
        if self.kind in TAGGER_KINDS:
            from ..finetuning.predict import tag
            from ..models.elmo.modeling_elmo import word_offsets

            results = tag(self.task_model, self.tokenizer, list(texts), batch_size=self.batch_size) if texts else []
            characters = self.kind == "character-tagging"
            return [{"words": result["words"],
                     "offsets": _offsets(self.tokenizer, text, characters, result, word_offsets),
                     "tags": result["tags"], "entities": result["entities"]}
                    for text, result in zip(texts, results)]
        from ..finetuning.run import classify

        results = classify(self.task_model, self.tokenizer, list(texts), batch_size=self.batch_size) if texts else []
        return [{key: result[key] for key in ("words", "label", "score", "scores")} for result in results]

    def close(self) -> None:
        pass


def _offsets(tokenizer, text: str, characters: bool, result: dict, word_offsets) -> list:
    """Each labelled unit's (start, end) in the text: from the tokenizer where it gives offsets, else found."""
    if hasattr(tokenizer, "words_with_offsets"):
        from ..convert.onnx.client import Word, _units

        found = [Word(*item) for item in tokenizer.words_with_offsets(text)]
        if characters:
            return [list(span) for span in _units(found, text)[1]]
        return [[start, end] for _, start, end in found]
    lowercase = getattr(tokenizer, "do_lower_case", False)
    return [list(span) if span is not None else None for span in word_offsets(text, result["words"], lowercase)]


def open_backend(model: str, backend: str = "auto", threads: int | None = None, batch_size: int = 32,
                 layers: str | int = "average", log=print):
    """The backend for `model` (a model folder, a Hub id, 'default', or an ONNX export folder): an export folder
    runs on onnxruntime; a model runs on onnxruntime after an export to a temporary folder (`auto` when onnx and
    onnxruntime are installed), else on PyTorch."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    exported = export_folder(model)
    if exported is not None:
        if backend == "torch":
            raise ValueError(f"{model} is an ONNX export: it runs on onnxruntime (--backend onnx), not PyTorch")
        return OnnxBackend(exported, threads, batch_size, layers=layers)
    if backend == "onnx" or (backend == "auto" and onnx_available()):
        if not onnx_available():
            raise ValueError("--backend onnx needs onnx and onnxruntime: pip install -e \".[export]\" (or "
                             "pip install onnx onnxruntime)")
        from .. import register_auto_classes
        from ..convert.onnx import export_onnx
        from ..loading import resolve_model_name

        register_auto_classes()
        workdir = tempfile.mkdtemp(prefix="hf-elmo-serve-")
        try:
            log(f"hf-elmo serve: exporting {model} to ONNX in {workdir}")
            folder = export_onnx(resolve_model_name(model), os.path.join(workdir, "model"))
            return OnnxBackend(folder, threads, batch_size, source=model, layers=layers, cleanup=workdir)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    return TorchBackend(model, threads, batch_size, layers=layers)


__all__ = ["BACKENDS", "OnnxBackend", "TorchBackend", "export_folder", "onnx_available", "open_backend"]
