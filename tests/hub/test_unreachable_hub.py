"""A Hub name that cannot be fetched fails at once with what to do instead; a cached one loads from the cache."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from hub_helpers import REPO_ROOT, hub, hub_env, run_python, tiny_model, tiny_tokenizer  # noqa: F401  (hub: fixture)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def info(model: str, env: dict, timeout: int = 30) -> subprocess.CompletedProcess:
    """`hf-elmo info`; the timeout is a bound on the behaviour (the old client retried for 33 s), not a benchmark."""
    return subprocess.run(
        [sys.executable, "-m", "hf_elmo.cli", "info", "--json", "--model", model],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
    )


def assert_says_what_to_do(result, reason: str) -> None:
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hf-elmo: error:"), lines
    for hint in (reason, "--model default", "local model folder", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        assert hint in lines[0], (hint, lines[0])


def test_offline_and_not_cached(hub, tmp_path):
    assert_says_what_to_do(info("org/not-cached", hub_env(hub, tmp_path / "home", offline=True)), "HF_HUB_OFFLINE is set")
    assert hub.request_count() == 0


def test_unreachable_hub_is_one_error_without_retries(hub, tmp_path):
    env = hub_env(hub, tmp_path / "home")
    env["HF_ENDPOINT"] = closed_port_url()
    assert_says_what_to_do(info("org/elmo-zh", env), "cannot be reached")


def test_unreachable_hub_uses_a_cached_model(hub, tmp_path):
    home = tmp_path / "home"
    tiny_model(seed=0).save_pretrained(tmp_path / "model")
    tiny_tokenizer().save_pretrained(tmp_path / "model")
    run_python(
        f"""
        from hf_elmo import ElmoModel, ElmoTokenizer
        ElmoModel.from_pretrained({str(tmp_path / "model")!r}).push_to_hub("org/cached")
        ElmoTokenizer.from_pretrained({str(tmp_path / "model")!r}).push_to_hub("org/cached")
        """,
        hub_env(hub, home), cwd=tmp_path,
    )
    online = info("org/cached", hub_env(hub, home), timeout=120)  # downloads into the cache
    assert online.returncode == 0, online.stderr[-3000:]
    env = hub_env(hub, home)
    env["HF_ENDPOINT"] = closed_port_url()
    offline = info("org/cached", env, timeout=120)
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert json.loads(offline.stdout)["parameters"] == json.loads(online.stdout)["parameters"]
    assert "unreachable: loading org/cached from the local cache" in offline.stderr
