"""The service's batcher without HTTP: requests that wait together run as one batch, a request that fails does not
fail those batched with it, and a full queue refuses with 429."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from hf_elmo.serving.app import Batcher, Limits, Metrics, RequestProblem  # noqa: E402


class FakeBackend:
    kind, dim = "sequence-classification", 2

    def __init__(self, gate: threading.Event | None = None):
        self.batches: list[list[str]] = []
        self.gate = gate

    def predict(self, texts):
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append(list(texts))
        if "bad" in texts:
            raise ValueError("the text 'bad' cannot be read")
        return [{"label": text.upper()} for text in texts]

    def embed(self, texts):
        self.batches.append(list(texts))
        return np.ones((len(texts), 2), np.float32), [[text] for text in texts]


async def _requests(batcher, groups):
    jobs = [batcher.submit("predict", texts) for texts in groups]
    return await asyncio.gather(*(job.future for job in jobs), return_exceptions=True)


def test_waiting_requests_share_a_batch_and_a_failure_stays_with_its_request():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, Limits(max_batch_size=8, max_wait_ms=50), Metrics())
        batcher.start()
        try:
            together = await _requests(batcher, [["a"], ["b", "c"], ["d"]])
            isolated = await _requests(batcher, [["e"], ["bad"], ["f"]])
            vectors, words = await batcher.submit("embed", ["x", "y"]).future
        finally:
            await batcher.stop()
        return backend, together, isolated, vectors, words

    backend, together, isolated, vectors, words = asyncio.run(scenario())
    assert together == [[{"label": "A"}], [{"label": "B"}, {"label": "C"}], [{"label": "D"}]]
    assert backend.batches[0] == ["a", "b", "c", "d"]  # one batch for the three requests
    assert isolated[0] == [{"label": "E"}] and isolated[2] == [{"label": "F"}]
    assert isinstance(isolated[1], ValueError) and "'bad'" in str(isolated[1])
    assert vectors.shape == (2, 2) and words == [["x"], ["y"]]


def test_a_full_queue_is_a_429_and_the_service_goes_on():
    async def scenario():
        gate = threading.Event()
        batcher = Batcher(FakeBackend(gate), Limits(max_batch_size=1, max_wait_ms=0, max_queue=2), Metrics())
        batcher.start()
        try:
            running = batcher.submit("predict", ["a"])
            await asyncio.sleep(0.2)  # the worker holds "a" (blocked in the model); the queue is empty again
            waiting = [batcher.submit("predict", [text]) for text in ("b", "c")]
            with pytest.raises(RequestProblem) as refused:
                batcher.submit("predict", ["d"])
            gate.set()
            answers = await asyncio.gather(running.future, *(job.future for job in waiting))
            later = await batcher.submit("predict", ["e"]).future
        finally:
            gate.set()
            await batcher.stop()
        return refused.value, answers, later

    refused, answers, later = asyncio.run(scenario())
    assert refused.status == 429 and "2 requests are waiting already (--max-queue)" in refused.message
    assert answers == [[{"label": "A"}], [{"label": "B"}], [{"label": "C"}]] and later == [{"label": "E"}]
