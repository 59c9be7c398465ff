"""`hf-elmo serve` started as a process on 127.0.0.1 and driven with a real HTTP client (httpx).

Each endpoint's answer equals the Python API's (`Embedder.sentence_vectors`, `tagging.tag`, `finetune.classify`)
on onnxruntime and on PyTorch; malformed JSON, a wrong field type, an empty list, a 1 MB text, 1,000 texts in
one request and clients that disconnect mid-request each get their answer while a concurrent well-formed request
succeeds; SIGTERM during a request completes that request and then stops the service.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
pytest.importorskip("onnxruntime")
httpx = pytest.importorskip("httpx")

import task_models  # noqa: E402
from paths import REPO_ROOT  # noqa: E402
from task_models import TEXTS  # noqa: E402

from hf_elmo import Embedder  # noqa: E402
from hf_elmo.convert.onnx import export_onnx  # noqa: E402
from hf_elmo.finetuning.run import classify  # noqa: E402
from hf_elmo.finetuning.predict import tag  # noqa: E402

STARTUP_SECONDS = 180


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Service:
    """One `hf-elmo serve` process; stopped (SIGTERM, then SIGKILL) when the test is done with it."""

    def __init__(self, log_path, *options):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        environment = {**os.environ, "OMP_NUM_THREADS": "1",
                       "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hf_elmo.cli", "serve", "--port", str(self.port), "--threads", "1",
             "--log-level", "warning", *options], stdout=self.log, stderr=subprocess.STDOUT, env=environment,
            cwd=REPO_ROOT)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.output()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"serve did not answer within {STARTUP_SECONDS} s: {self.output()[-3000:]}")

    def output(self) -> str:
        self.log.flush()
        return open(self.log_path, encoding="utf-8", errors="replace").read()

    def post(self, path, body, **kwargs):
        return httpx.post(self.url + path, json=body, timeout=60, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def tagger_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    model = task_models.crf_tagger()
    source = task_models.save(model, folder / "ner")
    export_onnx(source, folder / "ner-onnx")
    return model, source, folder / "ner-onnx"


@pytest.fixture(scope="module")
def tagger_service(tagger_folder, tmp_path_factory):
    _, _, exported = tagger_folder
    service = Service(tmp_path_factory.mktemp("logs") / "serve.log", "--model", str(exported),
                      "--max-client-batch", "1000", "--max-text-chars", "20000", "--max-queue", "64")
    yield service
    service.stop()


def python_api_vectors(model, texts, normalise=False):
    vectors = Embedder(model.elmo, tokenizer=task_models.tokenizer(), device="cpu").sentence_vectors(texts)
    if normalise:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-30)
    return vectors


def assert_tagged_as_python_api(got, model, texts):
    expected = tag(model, task_models.tokenizer(), texts)
    assert len(got) == len(expected)
    for result, want, text in zip(got, expected, texts):
        assert result["words"] == want["words"] and result["tags"] == want["tags"]
        assert [(e["entity"], e["word"], e["start"], e["end"]) for e in result["entities"]] == \
            [(e["entity"], e["word"], e["start"], e["end"]) for e in want["entities"]]
        assert np.allclose([e["score"] for e in result["entities"]], [e["score"] for e in want["entities"]],
                           atol=1e-4)
        assert all(text[start:end] == word for word, (start, end) in zip(result["words"], result["offsets"]))


def test_a_port_in_use_is_named_before_anything_is_loaded(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "hf_elmo.cli", "serve", "--port", str(port)],
                                capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"hf-elmo: error: cannot listen on 127.0.0.1:{port}: ")


def test_each_endpoint_equals_the_python_api_on_onnxruntime(tagger_folder, tagger_service):
    model = tagger_folder[0]
    health = httpx.get(tagger_service.url + "/health").json()
    assert health["kind"] == "token-classification" and health["backend"] == "onnx"
    maps = f"/proc/{tagger_service.process.pid}/maps"
    if os.path.exists(maps):  # an export is served without torch
        assert "libtorch" not in open(maps).read()
    assert health["labels"] == task_models.TAGS

    response = tagger_service.post("/embed", {"inputs": TEXTS, "normalize": False})
    assert response.status_code == 200
    assert np.allclose(response.json(), python_api_vectors(model, TEXTS), atol=1e-5)
    normalised = tagger_service.post("/embed", {"inputs": TEXTS[0]}).json()  # TEI: one string, normalize=true
    assert np.allclose(normalised, python_api_vectors(model, TEXTS[:1], normalise=True), atol=1e-5)

    openai = tagger_service.post("/v1/embeddings", {"input": TEXTS, "model": "ner"}).json()
    assert openai["object"] == "list" and openai["model"] == "ner"
    assert [item["index"] for item in openai["data"]] == list(range(len(TEXTS)))
    words = sum(len(words) for words in task_models.tokenizer()(TEXTS, return_words=True)["words"])
    assert openai["usage"] == {"prompt_tokens": words, "total_tokens": words}
    assert np.allclose([item["embedding"] for item in openai["data"]], python_api_vectors(model, TEXTS, True),
                       atol=1e-5)
    packed = tagger_service.post("/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "base64"}).json()
    unpacked = [np.frombuffer(base64.b64decode(item["embedding"]), "<f4") for item in packed["data"]]
    assert np.allclose(unpacked, python_api_vectors(model, TEXTS[:2], True), atol=1e-5)

    predictions = tagger_service.post("/predict", {"inputs": TEXTS})
    assert predictions.status_code == 200
    assert_tagged_as_python_api(predictions.json(), model, TEXTS)

    metrics = httpx.get(tagger_service.url + "/metrics").text
    assert 'hf_elmo_requests_total{path="/predict",status="200"}' in metrics
    assert "hf_elmo_batch_texts_bucket" in metrics and "hf_elmo_queue_depth" in metrics


async def _together(service, bad, good_texts):
    """`bad` (a coroutine function taking the client) while a well-formed /predict request runs beside it."""
    async with httpx.AsyncClient(base_url=service.url, timeout=120) as client:
        return await asyncio.gather(bad(client), client.post("/predict", json={"inputs": good_texts}))


def _raw(content):
    async def send(client):
        return await client.post("/predict", content=content, headers={"content-type": "application/json"})
    return send


def _chunked(size):
    """A body sent in chunks, without Content-Length."""
    async def chunks():
        yield b'{"inputs": ["'
        for _ in range(size // 100_000):
            yield b"a" * 100_000
        yield b'"]}'

    async def send(client):
        return await client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
    return send


def _json(body, path="/predict"):
    async def send(client):
        return await client.post(path, json=body)
    return send


@pytest.mark.parametrize("name, bad, status, message", [
    ("malformed JSON", _raw(b'{"inputs": ["a", }'), 400, "not valid JSON"),
    ("a wrong field type", _json({"inputs": 5}), 422, "inputs must be a string or a list of strings, got a number"),
    ("token ids to OpenAI's endpoint", _json({"input": [[1, 2]]}, "/v1/embeddings"), 422, "token ids are not accepted"),
    ("an empty list", _json({"inputs": []}), 422, "inputs is an empty list"),
    ("a 1 MB text", _json({"inputs": ["a" * 1_000_000]}), 413, "over the limit of 20,000 (--max-text-chars"),
    ("a 5 MB body", _json({"inputs": ["a" * 5_000_000]}), 413, "over the limit of 4,000,000 (--max-request-bytes)"),
    ("a 5 MB body in chunks", _chunked(5_000_000), 413, "over the limit of 4,000,000 bytes (--max-request-bytes)"),
    ("1,001 texts", _json({"inputs": ["a"] * 1001}), 413, "1,001 texts, over the limit of 1,000"),
    ("a missing field", _json({"text": "a"}), 422, "inputs: Field required"),
])
def test_a_bad_request_gets_its_answer_while_a_good_one_succeeds(tagger_folder, tagger_service, name, bad, status,
                                                                 message):
    answer, good = asyncio.run(_together(tagger_service, bad, TEXTS))
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert message in (error["message"] if isinstance(error, dict) else error)
    assert good.status_code == 200
    assert_tagged_as_python_api(good.json(), tagger_folder[0], TEXTS)


def test_a_thousand_texts_in_one_request_and_a_concurrent_one(tagger_folder, tagger_service):
    texts = [TEXTS[i % len(TEXTS)] + str(i) for i in range(1000)]
    many, good = asyncio.run(_together(tagger_service, _json({"inputs": texts}), TEXTS[:2]))
    assert many.status_code == 200 and good.status_code == 200
    got = many.json()
    assert len(got) == 1000
    assert_tagged_as_python_api(got[:8] + got[-3:], tagger_folder[0], texts[:8] + texts[-3:])
    assert_tagged_as_python_api(good.json(), tagger_folder[0], TEXTS[:2])


def test_clients_that_disconnect_mid_request(tagger_folder, tagger_service):
    """A client that sends half its body and one that leaves before the answer: the service drops them and
    answers a well-formed request sent meanwhile."""
    body = json.dumps({"inputs": [TEXTS[0] * 100] * 100}).encode()
    half = socket.create_connection(("127.0.0.1", tagger_service.port))
    half.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
    whole = socket.create_connection(("127.0.0.1", tagger_service.port))
    whole.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(0.3)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(tagger_service.post, "/predict", {"inputs": TEXTS})
        time.sleep(0.05)
        half.close()
        whole.close()
        response = pending.result(timeout=120)
    assert response.status_code == 200
    assert_tagged_as_python_api(response.json(), tagger_folder[0], TEXTS)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # a request whose client left while it ran is dropped at its next poll
        if "hf_elmo_disconnected_total 1.0" in httpx.get(tagger_service.url + "/metrics").text:
            break
        time.sleep(0.2)
    assert httpx.get(tagger_service.url + "/health").status_code == 200
    assert tagger_service.process.poll() is None


def test_the_pytorch_backend_gives_the_same_answers(tagger_folder, tmp_path):
    model, source, _ = tagger_folder
    service = Service(tmp_path / "serve.log", "--model", source, "--backend", "torch")
    try:
        assert httpx.get(service.url + "/health").json()["backend"] == "torch"
        assert np.allclose(service.post("/embed", {"inputs": TEXTS, "normalize": False}).json(),
                           python_api_vectors(model, TEXTS), atol=1e-6)
        assert_tagged_as_python_api(service.post("/predict", {"inputs": TEXTS}).json(), model, TEXTS)
    finally:
        service.stop()


def test_a_classifier_and_sigterm_during_a_request(tmp_path):
    """A sentence classifier answers /predict as `classify`; SIGTERM while a long request runs lets it complete,
    refuses new connections, and the process exits 0."""
    model = task_models.classifier()
    folder = export_onnx(model, tmp_path / "sentiment-onnx", tokenizer=task_models.tokenizer())
    service = Service(tmp_path / "serve.log", "--model", str(folder))
    try:
        got = service.post("/predict", {"inputs": TEXTS}).json()
        expected = classify(model, task_models.tokenizer(), TEXTS)
        assert [result["label"] for result in got] == [want["label"] for want in expected]
        for result, want in zip(got, expected):
            assert np.allclose(list(result["scores"].values()) or [0], list(want["scores"].values()) or [0],
                               atol=1e-5)
        assert service.post("/embed", {"inputs": "x"}).status_code == 200

        long_texts = [TEXTS[4] * 120 + str(i) for i in range(200)]  # 400,000 characters: seconds of work

        async def during_shutdown():
            async with httpx.AsyncClient(base_url=service.url, timeout=120) as client:
                pending = asyncio.ensure_future(client.post("/predict", json={"inputs": long_texts}))
                await asyncio.sleep(0.3)  # the request is being read or run
                in_flight = not pending.done()
                service.process.send_signal(signal.SIGTERM)
                return await pending, in_flight

        response, in_flight = asyncio.run(during_shutdown())
        assert in_flight  # the signal came while the request was being served
        assert response.status_code == 200
        got = response.json()
        assert len(got) == 200
        assert [result["label"] for result in got[:2]] == \
            [want["label"] for want in classify(model, task_models.tokenizer(), long_texts[:2])]
        assert service.process.wait(timeout=60) == 0
        assert "hf-elmo serve: stopped" in service.output()
        with pytest.raises(httpx.TransportError):
            httpx.get(service.url + "/health", timeout=2)
    finally:
        service.stop()


def test_the_shipped_model_on_the_default_backend(tmp_path):
    """A model folder (here the word `default`, the shipped model) is exported to ONNX at start and served on
    onnxruntime; /predict of an encoder is a 400 naming the endpoints that serve it."""
    pytest.importorskip("onnx")
    import hf_elmo

    service = Service(tmp_path / "serve.log")
    try:
        assert httpx.get(service.url + "/health").json()["backend"] == "onnx"
        response = service.post("/predict", {"inputs": ["我们喝小米粥。"]})
        assert response.status_code == 400 and "/embed" in response.json()["error"]
        vectors = service.post("/embed", {"inputs": ["我们喝小米粥。", "ELMo 2018 😀!", ""], "normalize": False}).json()
        expected = Embedder(hf_elmo.DEFAULT_MODEL, device="cpu").sentence_vectors(["我们喝小米粥。", "ELMo 2018 😀!", ""])
        assert np.allclose(vectors, expected, atol=1e-4)
    finally:
        service.stop()
