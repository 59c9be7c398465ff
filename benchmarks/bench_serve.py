"""`hf-elmo serve` under load: throughput and latency with N concurrent clients against one request at a time.

Starts `hf-elmo serve` (default: the shipped model, on onnxruntime) on 127.0.0.1, then drives it with real HTTP
requests of one sentence each (Chinese sentences from docs/examples/), from a bounded number of clients that each
send their next request when the previous one is answered:

* the one-at-a-time loop: one client, so every request is a batch of one;
* `--clients` concurrent clients (default 1, 4, 16): the dynamic batcher puts what waits into one batch.

Prints a Markdown table (requests/s, p50 and p99 latency, throughput against the loop) and the machine's load
(`uptime`): the figures mean little on a machine busy with other work.

    python benchmarks/bench_serve.py                        # the shipped model, /embed, 1 / 4 / 16 clients
    (needs pip install -e ".[serve,export]")
    python benchmarks/bench_serve.py --requests 200 --clients 1 16 --endpoint predict --model runs/ner
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sentences() -> list[str]:
    lines = []
    for name in ("xiaomi.txt", "xiaomi_more.txt"):
        path = ROOT / "docs" / "examples" / name
        if path.exists():
            lines += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines or ["我们喝小米粥。", "小米发布了新手机，价格很便宜！"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, ""


def start_service(args, port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "hf_elmo.cli", "serve", "--model", args.model, "--port", str(port),
               "--backend", args.backend, "--max-batch-size", str(args.max_batch_size),
               "--max-wait-ms", str(args.max_wait_ms), "--log-level", "warning"]
    if args.threads:
        command += ["--threads", str(args.threads)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"serve exited: {process.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            if get(f"http://127.0.0.1:{port}/health")[0] == 200:
                return process
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit("serve did not start within 300 s")


def drive(port: int, path: str, texts: list[str], clients: int, requests: int) -> tuple[float, list[float]]:
    """(seconds for all requests, each request's latency) with `clients` closed-loop clients: threads of the standard
    library's http.client on keep-alive connections (light enough that the clients are not what is measured: an
    asyncio client of the same requests spent more time per request than the service)."""
    import http.client
    import json
    import threading

    latencies: list[float] = []
    numbers = iter(range(requests))
    lock = threading.Lock()
    failures: list[str] = []

    def one_client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            while True:
                with lock:
                    number = next(numbers, None)
                if number is None or failures:
                    return
                body = {"inputs": texts[number % len(texts)]}
                if path == "/embed":
                    body["normalize"] = False
                data = json.dumps(body, ensure_ascii=False).encode("utf-8")
                started = time.perf_counter()
                connection.request("POST", path, data, {"Content-Type": "application/json"})
                response = connection.getresponse()
                answer = response.read()
                elapsed = time.perf_counter() - started
                if response.status != 200:
                    failures.append(f"{path} answered {response.status}: {answer[:300]!r}")
                with lock:
                    latencies.append(elapsed)
        finally:
            connection.close()

    threads = [threading.Thread(target=one_client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(failures[0])
    return time.perf_counter() - started, latencies


def batch_totals(url: str) -> tuple[float, float]:
    """(batches run, texts in them) so far, from the service's Prometheus metrics."""
    totals = {"hf_elmo_batch_texts_count": 0.0, "hf_elmo_batch_texts_sum": 0.0}
    for line in get(url + "/metrics")[1].splitlines():
        name, _, value = line.partition(" ")
        if name in totals:
            totals[name] = float(value)
    return totals["hf_elmo_batch_texts_count"], totals["hf_elmo_batch_texts_sum"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default", help="model folder, Hub id or ONNX export (default: shipped)")
    parser.add_argument("--backend", default="auto", choices=("auto", "onnx", "torch"))
    parser.add_argument("--endpoint", default="embed", choices=("embed", "predict"))
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16], help="concurrent clients per run")
    parser.add_argument("--requests", type=int, default=400, help="requests per run (default 400)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="the service's model threads (default: this machine's cores)")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    if 1 not in args.clients:
        args.clients = [1, *args.clients]
    texts = sentences()
    port = free_port()
    process = start_service(args, port)
    url, path = f"http://127.0.0.1:{port}", "/" + args.endpoint
    rows = []
    try:
        drive(port, path, texts, 4, 40)  # warm-up: sessions, connections, jieba
        for clients in sorted(set(args.clients)):
            batches, batched = batch_totals(url)
            seconds, latencies = drive(port, path, texts, clients, args.requests)
            after, after_texts = batch_totals(url)
            rows.append((clients, len(latencies) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.99),
                         (after_texts - batched) / max(after - batches, 1)))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    loop = next(row[1] for row in rows if row[0] == 1)
    average_words = sum(len(text) for text in texts) / len(texts)
    print(f"model {args.model}, {args.backend} backend, POST {path}, one sentence a request ({len(texts)} sentences "
          f"of {average_words:.0f} characters on average), {args.requests} requests a run, service --threads "
          f"{args.threads} --max-batch-size {args.max_batch_size} --max-wait-ms {args.max_wait_ms:g}")
    print(f"load: {load}")
    print()
    print("| concurrent clients | requests/s | p50 latency ms | p99 latency ms | mean batch (texts) | "
          "throughput vs one at a time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for clients, rate, p50, p99, batch in rows:
        print(f"| {clients}{' (one at a time)' if clients == 1 else ''} | {rate:.1f} | {p50 * 1000:.1f} | "
              f"{p99 * 1000:.1f} | {batch:.1f} | {rate / loop:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
