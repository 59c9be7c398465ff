"""`hf-elmo serve`: an hf-elmo model over HTTP (FastAPI on uvicorn, dynamic batching, Prometheus metrics), on
onnxruntime or PyTorch. See docs/serving.md."""

from .app import Limits, create_app
from .backends import open_backend

__all__ = ["Limits", "create_app", "open_backend"]
