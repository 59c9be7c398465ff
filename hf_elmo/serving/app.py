"""The HTTP service of `hf-elmo serve` (FastAPI on uvicorn; docs/serving.md).

    POST /embed            text-embeddings-inference's shapes: {"inputs": str | [str], "normalize": true,
                           "truncate": false} -> [[float, ...], ...]
    POST /v1/embeddings    OpenAI's shapes: {"input": str | [str], "model": ..., "encoding_format": "float" |
                           "base64"} -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
                           "model", "usage": {"prompt_tokens", "total_tokens"}} (tokens are words)
    POST /predict          taggers: {"inputs": ...} -> [{"words", "offsets", "tags", "entities"}, ...];
                           sentence classifiers: [{"words", "label", "score", "scores"}, ...]
    GET  /health           {"status": "ok", "model", "kind", "backend", "dim", "labels"}
    GET  /metrics          Prometheus text format

Requests are batched dynamically: handlers put their texts on a bounded queue; one worker takes what is waiting,
up to `max_batch_size` texts (waiting at most `max_wait_ms` for more while the batch holds fewer requests than were
lately in the service at once: answered clients come back, and a lone client never waits), and runs it in one
thread, so the event loop keeps answering. Limits: characters per text, texts per request, bytes per request body,
requests waiting. A request over a limit or malformed gets a 4xx JSON error naming the problem; the service keeps
serving. The service holds no state between requests: replicas behind a load balancer are interchangeable.
"""

from __future__ import annotations

import asyncio
import base64
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import Request
from pydantic import BaseModel, ConfigDict

DISCONNECT_POLL_SECONDS = 0.2
PEAK_WINDOW_SECONDS = 1.0  # how long the batcher remembers how many requests were in the service at once


class EmbedRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    inputs: Any
    normalize: bool = True
    truncate: bool = False


class OpenAIRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    input: Any
    model: str | None = None
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    inputs: Any
    truncate: bool = False


@dataclass(frozen=True)
class Limits:
    max_batch_size: int = 32  # texts the model runs at once
    max_wait_ms: float = 5.0  # how long a batch waits for the requests expected to join it
    max_queue: int = 256  # requests waiting for the model; more get 429
    max_client_batch: int = 256  # texts in one request
    max_text_chars: int = 20_000  # characters of one text (truncate=true cuts instead of refusing)
    max_request_bytes: int = 4_000_000  # bytes of one request body


class RequestProblem(Exception):
    """A request the service refuses: HTTP status and a message naming the problem."""

    def __init__(self, status: int, message: str, kind: str = "validation"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


@dataclass
class _Job:
    task: str  # "embed" or "predict"
    texts: list[str]
    future: asyncio.Future
    cancelled: bool = False
    queued: float = field(default_factory=time.perf_counter)


class Batcher:
    """A bounded queue of jobs and the one worker that runs them in batches."""

    def __init__(self, backend, limits: Limits, metrics):
        self.backend, self.limits, self.metrics = backend, limits, metrics
        self.queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=limits.max_queue)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-elmo-model")
        self.task: asyncio.Task | None = None
        self.in_flight = 0
        self._outstanding = 0  # requests submitted and not yet answered
        self._peak, self._peak_time = 0, time.perf_counter()  # the most outstanding at once, lately

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._work())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.executor.shutdown(wait=True)

    def submit(self, task: str, texts: list[str]) -> _Job:
        job = _Job(task, texts, asyncio.get_running_loop().create_future())
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            raise RequestProblem(429, f"the service is busy: {self.limits.max_queue} requests are waiting already "
                                      "(--max-queue); retry later", "overloaded") from None
        self.metrics.queue_depth.set(self.queue.qsize())
        self._note_outstanding(1)
        job.future.add_done_callback(lambda _: self._note_outstanding(-1))
        return job

    def _expected(self) -> int:
        """How many requests a batch can expect: the most that were in the service at once (waiting or running)
        within the last `PEAK_WINDOW_SECONDS`. Answered clients come back, so the peak is who is using it now."""
        now = time.perf_counter()
        if now - self._peak_time > PEAK_WINDOW_SECONDS:
            self._peak, self._peak_time = self._outstanding, now
        return self._peak

    def _note_outstanding(self, change: int) -> None:
        self._outstanding += change
        self._expected()
        if self._outstanding > self._peak:
            self._peak, self._peak_time = self._outstanding, time.perf_counter()

    async def _gather(self, first: _Job) -> list[_Job]:
        """`first` and every job waiting behind it, up to the batch size (a larger job runs alone); then, while the
        batch holds fewer requests than have lately been in the service at once, what arrives within
        `max_wait_ms`: clients just answered come back, and a lone client never waits."""
        jobs, count = [first], len(first.texts)
        deadline = time.perf_counter() + self.limits.max_wait_ms / 1000
        while count < self.limits.max_batch_size:
            try:
                job = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or len(jobs) >= self._expected():
                    break
                await asyncio.sleep(min(remaining, 0.0005))
                continue
            jobs.append(job)
            count += len(job.texts)
        return jobs

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._gather(await self.queue.get())
            self.metrics.queue_depth.set(self.queue.qsize())
            for job in jobs:
                if job.cancelled:  # its client left while it waited: not run
                    job.future.cancel()
            jobs = [job for job in jobs if not job.cancelled]
            for task in ("embed", "predict"):
                group = [job for job in jobs if job.task == task]
                if not group:
                    continue
                try:
                    await self._answer(loop, task, group)
                except Exception as error:  # noqa: BLE001 - a request's failure must not fail those batched with it
                    if len(group) == 1:
                        _fail(group[0], error)
                        continue
                    for job in group:  # each alone: the one that fails gets its own error
                        try:
                            await self._answer(loop, task, [job])
                        except Exception as own:  # noqa: BLE001
                            _fail(job, own)

    async def _answer(self, loop, task: str, group: list[_Job]) -> None:
        """Run the texts of `group` as one batch and give each job its part."""
        texts = [text for job in group for text in job.texts]
        started = time.perf_counter()
        self.in_flight += len(group)
        try:
            results = await loop.run_in_executor(self.executor, self._run, task, texts)
        finally:
            self.in_flight -= len(group)
        self.metrics.batch_texts.observe(len(texts))
        self.metrics.inference_seconds.observe(time.perf_counter() - started)
        begin = 0
        for job in group:
            end = begin + len(job.texts)
            if not job.future.done():
                job.future.set_result(_slice(results, begin, end))
            begin = end

    def _run(self, task: str, texts: list[str]):
        return self.backend.embed(texts) if task == "embed" else self.backend.predict(texts)


def _fail(job: _Job, error: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(error)


def _slice(results, begin: int, end: int):
    if isinstance(results, tuple):  # (vectors, words)
        return results[0][begin:end], results[1][begin:end]
    return results[begin:end]


class Metrics:
    """The service's Prometheus metrics, in a registry of its own."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("hf_elmo_requests", "HTTP requests by path and status", ["path", "status"],
                                registry=self.registry)
        self.request_seconds = Histogram("hf_elmo_request_seconds", "Time from a request to its answer", ["path"],
                                         registry=self.registry,
                                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.texts = Counter("hf_elmo_texts", "Texts received by task", ["task"], registry=self.registry)
        self.batch_texts = Histogram("hf_elmo_batch_texts", "Texts in each batch the model ran", registry=self.registry,
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
        self.inference_seconds = Histogram(
            "hf_elmo_inference_seconds", "Time the model took for a batch", registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10))
        self.queue_depth = Gauge("hf_elmo_queue_depth", "Requests waiting for the model", registry=self.registry)
        self.disconnected = Counter("hf_elmo_disconnected", "Requests whose client left before the answer",
                                    registry=self.registry)


class _Guard:
    """ASGI middleware: refuses request bodies over the byte limit (by Content-Length before they are read; a body
    sent in chunks without one when it passes the limit), and counts every request in the metrics."""

    def __init__(self, app, limits: Limits, metrics: Metrics):
        self.app, self.limits, self.metrics = app, limits, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        known = path if path in _PATHS else "other"
        started = time.perf_counter()
        status = {"code": 500, "refused": False}
        limit = self.limits.max_request_bytes

        async def send_and_note(message):
            if status["refused"]:  # the 413 went out already: what the application answers after it is dropped
                return
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        received = {"bytes": 0}

        async def receive_counted():
            message = await receive()
            if message["type"] == "http.request":
                received["bytes"] += len(message.get("body", b""))
                if received["bytes"] > limit and not status["refused"]:
                    await _send_json(send_and_note, 413, _error_body(
                        path, f"the request body is over the limit of {limit:,} bytes (--max-request-bytes)",
                        "too_large"))
                    status["refused"] = True
                    return {"type": "http.disconnect"}
            return message

        length = dict(scope.get("headers") or []).get(b"content-length")
        try:
            if length is not None and (not length.isdigit() or int(length) > limit):
                await _send_json(send_and_note, 413, _error_body(
                    path, f"the request body is {int(length) if length.isdigit() else length!r} bytes, over the "
                          f"limit of {limit:,} (--max-request-bytes)", "too_large"))
                return
            await self.app(scope, receive_counted, send_and_note)
        finally:
            self.metrics.requests.labels(known, str(status["code"])).inc()
            self.metrics.request_seconds.labels(known).observe(time.perf_counter() - started)


_PATHS = ("/embed", "/v1/embeddings", "/predict", "/health", "/metrics")


async def _send_json(send, status: int, body: dict) -> None:
    import json

    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _error_body(path: str, message: str, kind: str) -> dict:
    """OpenAI's error shape under /v1/, text-embeddings-inference's elsewhere."""
    if path.startswith("/v1/"):
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return {"error": message, "error_type": kind}


def _as_texts(value, field_name: str, limits: Limits, truncate: bool = False) -> list[str]:
    """The texts of an `inputs` / `input` field, checked against the limits."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise RequestProblem(422, f"{field_name} must be a string or a list of strings, got "
                                  f"{_json_type(value)}" + (" (token ids are not accepted: ELMo reads text)"
                                                            if field_name == "input" else ""))
    if not texts:
        raise RequestProblem(422, f"{field_name} is an empty list: send at least one text")
    if len(texts) > limits.max_client_batch:
        raise RequestProblem(413, f"{field_name} holds {len(texts):,} texts, over the limit of "
                                  f"{limits.max_client_batch:,} per request (--max-client-batch)", "too_large")
    for index, text in enumerate(texts):
        if len(text) > limits.max_text_chars:
            if truncate:
                texts = [text[: limits.max_text_chars] for text in texts]
                break
            raise RequestProblem(413, f"{field_name}[{index}] has {len(text):,} characters, over the limit of "
                                      f"{limits.max_text_chars:,} (--max-text-chars; \"truncate\": true cuts it)",
                                 "too_large")
    return list(texts)


def _json_type(value) -> str:
    if isinstance(value, list):
        kinds = sorted({_json_type(item) for item in value})
        return "a list of " + " and ".join(kinds) if kinds else "an empty list"
    return {dict: "an object", bool: "a boolean", int: "a number", float: "a number", type(None): "null",
            str: "a string"}.get(type(value), type(value).__name__)


def create_app(backend, limits: Limits | None = None):
    """The FastAPI application serving `backend` (serving.backends)."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

    limits = limits or Limits()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app):
        app.state.batcher = Batcher(backend, limits, metrics)
        app.state.batcher.start()
        try:
            yield
        finally:
            await app.state.batcher.stop()

    app = FastAPI(title="hf-elmo", summary="ELMo vectors, tags and labels over HTTP", lifespan=lifespan)

    @app.exception_handler(RequestProblem)
    async def problem(request: Request, error: RequestProblem):
        return JSONResponse(_error_body(request.url.path, error.message, error.kind), status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError):
        problems = error.errors()
        first = problems[0] if problems else {}
        if first.get("type") == "json_invalid":
            message = f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'parse error')})"
            return JSONResponse(_error_body(request.url.path, message, "validation"), status_code=400)
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        if not where:
            message = ("the request body must be a JSON object (Content-Type: application/json), e.g. "
                       '{"inputs": ["a text"]}')
            return JSONResponse(_error_body(request.url.path, message, "validation"), status_code=422)
        message = f"{where}: {first.get('msg', 'invalid')}" + (f" (and {len(problems) - 1} more problem(s))"
                                                                 if len(problems) > 1 else "")
        return JSONResponse(_error_body(request.url.path, message, "validation"), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        return JSONResponse(_error_body(request.url.path, str(error.detail), "http"), status_code=error.status_code)

    @app.exception_handler(Exception)
    async def failure(request: Request, error: Exception):
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        status = 422 if isinstance(error, (ValueError, TypeError)) else 500
        return JSONResponse(_error_body(request.url.path, message, "model"), status_code=status)

    async def answer(request: Request, task: str, texts: list[str]):
        metrics.texts.labels(task).inc(len(texts))
        job = request.app.state.batcher.submit(task, texts)
        while True:
            done, _ = await asyncio.wait({job.future}, timeout=DISCONNECT_POLL_SECONDS)
            if done:
                return job.future.result()
            if await request.is_disconnected():
                job.cancelled = True
                metrics.disconnected.inc()
                raise RequestProblem(499, "the client closed the connection", "disconnected")

    @app.post("/embed")
    async def embed(body: EmbedRequest, request: Request):
        texts = _as_texts(body.inputs, "inputs", limits, body.truncate)
        vectors, _ = await answer(request, "embed", texts)
        if body.normalize:
            vectors = _normalised(vectors)
        return Response(_json_floats(vectors), media_type="application/json")

    @app.post("/v1/embeddings")
    async def openai_embeddings(body: OpenAIRequest, request: Request):
        if body.encoding_format not in ("float", "base64"):
            raise RequestProblem(422, f"encoding_format must be 'float' or 'base64', got {body.encoding_format!r}")
        if body.dimensions is not None and body.dimensions != backend.dim:
            raise RequestProblem(422, f"dimensions: this model's vectors have {backend.dim} dimensions, got "
                                      f"{body.dimensions} (ELMo vectors cannot be shortened)")
        texts = _as_texts(body.input, "input", limits)
        vectors, words = await answer(request, "embed", texts)
        vectors = _normalised(vectors)  # OpenAI's embeddings have unit length
        count = sum(len(item) for item in words)
        data = [{"object": "embedding", "index": index,
                 "embedding": (base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                               if body.encoding_format == "base64" else vector.tolist())}
                for index, vector in enumerate(vectors)]
        return _json({"object": "list", "data": data, "model": body.model or backend.model,
                      "usage": {"prompt_tokens": count, "total_tokens": count}})

    @app.post("/predict")
    async def predict(body: PredictRequest, request: Request):
        if backend.kind == "encoder":
            raise RequestProblem(400, "this model is an encoder: it has no predictions (POST /embed or "
                                      "/v1/embeddings gives its vectors)", "unsupported")
        texts = _as_texts(body.inputs, "inputs", limits, body.truncate)
        return _json(await answer(request, "predict", texts))

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": backend.model, "kind": backend.kind, "backend": backend.name,
                "dim": backend.dim, "labels": backend.labels}

    @app.get("/metrics")
    async def prometheus_metrics():
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.state.metrics = metrics
    return _Guard(app, limits, metrics)


def _json(value):
    """A JSON response written by the standard library directly (the answers are plain lists, dicts, strings and
    numbers: FastAPI's encoder would walk them once more)."""
    import json

    from fastapi.responses import Response

    return Response(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8"),
                    media_type="application/json")


def _normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, np.finfo(np.float32).tiny)


def _json_floats(vectors: np.ndarray) -> bytes:
    """[[float, ...], ...] as JSON (float32 values written as Python floats; not-finite ones would be invalid)."""
    import json

    if not np.isfinite(vectors).all():
        raise ValueError("the model gave vectors that are not finite")
    return json.dumps(vectors.tolist(), separators=(",", ":")).encode("ascii")


__all__ = ["Batcher", "Limits", "Metrics", "RequestProblem", "create_app"]
