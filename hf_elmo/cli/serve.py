"""`hf-elmo serve`: a model folder, Hub id or ONNX export over HTTP (docs/serving.md)."""

from __future__ import annotations

import signal
import sys
from importlib.util import find_spec

from .common import check_model_folder, positive_int
from .errors import CommandError

# An ONNX export is served without torch: the backend registers the ELMo classes when it loads a PyTorch model.
REGISTERS_AUTO_CLASSES_ITSELF = True

HELP = "serve a model over HTTP: /embed, /v1/embeddings, /predict, /health, /metrics"
DESCRIPTION = """Serves an hf-elmo model folder, Hub id or `hf-elmo export --format onnx` folder on HTTP (FastAPI on
uvicorn): POST /embed (text-embeddings-inference's request and response), POST /v1/embeddings (OpenAI's),
POST /predict (taggers: entity spans with offsets; sentence classifiers: labels with scores), GET /health and
GET /metrics (Prometheus). Requests are batched dynamically (--max-batch-size texts, waiting at most
--max-wait-ms for company); requests over a limit get a 4xx JSON error naming it. SIGTERM (or Ctrl-C) stops
taking connections, answers the requests in flight, then exits. The model runs on onnxruntime (exported to a
temporary folder at start) when the export extra is installed, else on PyTorch (--backend). Needs
pip install -e ".[serve]" (and ".[export]" for onnxruntime). See docs/serving.md."""


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="default",
                        help="model folder, Hub id or ONNX export folder (default: the Chinese model shipped with "
                        "hf-elmo)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument("--backend", choices=("auto", "onnx", "torch"), default="auto",
                        help="auto (default): onnxruntime when onnx and onnxruntime are installed, else PyTorch")
    parser.add_argument("--threads", type=positive_int, help="threads the model computes with (default: the runtime's)")
    parser.add_argument("--layers", default="average",
                        help="the word vectors /embed averages: average (default), top, mix or a layer index")
    limits = parser.add_argument_group("batching and limits")
    limits.add_argument("--max-batch-size", type=positive_int, default=32,
                        help="texts the model runs at once (default 32)")
    limits.add_argument("--max-wait-ms", type=float, default=5.0,
                        help="how long a batch waits for the requests expected to join it: as many as were lately in "
                        "the service at once (default 5; a lone client never waits)")
    limits.add_argument("--max-queue", type=positive_int, default=256,
                        help="requests waiting for the model; more are answered 429 (default 256)")
    limits.add_argument("--max-client-batch", type=positive_int, default=256, help="texts in one request (default 256)")
    limits.add_argument("--max-text-chars", type=positive_int, default=20_000,
                        help="characters of one text (default 20,000)")
    limits.add_argument("--max-request-bytes", type=positive_int, default=4_000_000,
                        help="bytes of one request body (default 4,000,000)")
    limits.add_argument("--graceful-timeout", type=float, default=30.0,
                        help="seconds SIGTERM waits for the requests in flight (default 30)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                        help="uvicorn's log level (default info)")


def check(args) -> None:
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be in 0..65535, got {args.port}")
    if args.max_wait_ms < 0:
        raise CommandError(f"--max-wait-ms must be >= 0, got {args.max_wait_ms}")
    from ..serving.backends import export_folder

    if export_folder(args.model) is None:
        check_model_folder(args.model)
    _check_address(args.host, args.port)
    for package in ("fastapi", "uvicorn", "prometheus_client"):
        if find_spec(package) is None:
            raise CommandError(f"hf-elmo serve needs {package}: pip install -e \".[serve]\" (from a clone of "
                               "hf-elmo)")


def _check_address(host: str, port: int) -> None:
    """CommandError when `host:port` cannot be listened on (a port in use, an address not of this machine): said
    before the model is loaded, not after."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        raise CommandError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def run(args) -> int:
    import uvicorn

    from ..serving import Limits, create_app, open_backend

    layers = int(args.layers) if args.layers.lstrip("-").isdigit() else args.layers
    if layers not in ("average", "top", "mix") and not isinstance(layers, int):
        raise CommandError(f"--layers must be average, top, mix or a layer index, got {args.layers!r}")
    limits = Limits(max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                    max_client_batch=args.max_client_batch, max_text_chars=args.max_text_chars,
                    max_request_bytes=args.max_request_bytes)
    backend = open_backend(args.model, args.backend, args.threads, args.max_batch_size, layers,
                           log=lambda message: print(message, file=sys.stderr))
    try:
        print(f"hf-elmo serve: {backend.kind} {backend.model} on {backend.name}, http://{args.host}:{args.port}",
              file=sys.stderr)
        config = uvicorn.Config(create_app(backend, limits), host=args.host, port=args.port, log_level=args.log_level,
                                timeout_graceful_shutdown=args.graceful_timeout, access_log=False)
        # uvicorn answers SIGTERM by draining, then raises the signal again under the handler it found: with this
        # one the drained service exits 0 (and removes its temporary export) instead of dying by the signal.
        previous = signal.signal(signal.SIGTERM, lambda number, frame: None)
        try:
            uvicorn.Server(config).run()
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        backend.close()
    print("hf-elmo serve: stopped", file=sys.stderr)
    return 0


def after_interruption(args) -> str:
    return "the service stopped"
