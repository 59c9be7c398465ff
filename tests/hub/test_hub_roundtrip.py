"""Push to and pull from a Hub (the in-memory test Hub in hub_server.py), in fresh interpreters.

huggingface_hub and transformers read HF_ENDPOINT / HF_HUB_OFFLINE when imported, so every round
trip runs in a subprocess with its own HF_HOME; outputs come back as safetensors files and must be
bit-identical to the original model's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file

import hf_elmo

from hub_helpers import (
    REPO_ROOT,
    assert_same_outputs,
    encoder_outputs,
    hub,  # noqa: F401  (pytest fixture)
    hub_env,
    last_json,
    run_command,
    run_python,
    tiny_model,
    tiny_tokenizer,
)
import paths
from remote_code_files import CODE_FILES

FIXTURES = paths.FIXTURES / "allennlp_elmo"


def test_push_then_pull_main_pinned_revision_and_offline(hub, tmp_path):
    v1, v2, tokenizer = tiny_model(seed=0), tiny_model(seed=1), tiny_tokenizer()
    expected_v1, expected_v2 = encoder_outputs(v1, tokenizer), encoder_outputs(v2, tokenizer)
    assert not torch.equal(expected_v1["mix0"], expected_v2["mix0"])  # the pin must make a difference
    v1.save_pretrained(tmp_path / "v1")
    v2.save_pretrained(tmp_path / "v2")
    tokenizer.save_pretrained(tmp_path / "tokenizer")

    # 1. push model v1 + tokenizer, then model v2 on top; 2. pull main and the pinned v1 into the empty cache
    def pull(prefix: str, v1_commit: str) -> str:
        return f"""
        import hf_elmo
        from transformers import AutoModel, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained("org/elmo-zh")
        assert type(tokenizer).__name__ == "ElmoTokenizer" and tokenizer.segmenter == "chars", tokenizer
        main = AutoModel.from_pretrained("org/elmo-zh").eval()
        pinned = AutoModel.from_pretrained("org/elmo-zh", revision={v1_commit}).eval()
        pinned_tokenizer = AutoTokenizer.from_pretrained("org/elmo-zh", revision={v1_commit})
        save_file(encoder_outputs(main, tokenizer), {str(tmp_path / prefix) + "-main.safetensors"!r})
        save_file(encoder_outputs(pinned, pinned_tokenizer), {str(tmp_path / prefix) + "-pinned.safetensors"!r})
        """

    home = tmp_path / "hf-home"
    pushed = run_python(
        f"""
        from hf_elmo import ElmoModel, ElmoTokenizer
        ElmoModel.from_pretrained({str(tmp_path / "v1")!r}).push_to_hub("org/elmo-zh", commit_message="v1")
        v1 = ElmoTokenizer.from_pretrained({str(tmp_path / "tokenizer")!r}).push_to_hub("org/elmo-zh")
        v2 = ElmoModel.from_pretrained({str(tmp_path / "v2")!r}).push_to_hub("org/elmo-zh", commit_message="v2")
        report({{"v1": v1.oid, "v2": v2.oid}})
        """
        + pull("online", "v1.oid"),
        hub_env(hub, home),
        cwd=tmp_path,
    )
    commits = last_json(pushed)
    assert hub.head("org/elmo-zh") == commits["v2"]
    files = hub.files("org/elmo-zh")
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(files)
    package = Path(hf_elmo.__file__).resolve().parent / "models" / "elmo"
    for name in CODE_FILES:  # remote code travels along
        assert files[name] == (package / name).read_bytes(), name
    assert files["model.safetensors"] == (tmp_path / "v2" / "model.safetensors").read_bytes()
    assert hub.files("org/elmo-zh", commits["v1"])["model.safetensors"] == (tmp_path / "v1" / "model.safetensors").read_bytes()

    assert_same_outputs(load_file(tmp_path / "online-main.safetensors"), expected_v2)
    assert_same_outputs(load_file(tmp_path / "online-pinned.safetensors"), expected_v1)
    snapshots = {p.name for p in (home / "hub" / "models--org--elmo-zh" / "snapshots").iterdir()}
    assert {commits["v1"], commits["v2"]} <= snapshots

    # 3. the same loads with HF_HUB_OFFLINE=1 from that cache, without a single request to the Hub
    requests_before = hub.request_count()
    run_python(pull("offline", repr(commits["v1"])), hub_env(hub, home, offline=True), cwd=tmp_path)
    assert hub.request_count() == requests_before
    assert_same_outputs(load_file(tmp_path / "offline-main.safetensors"), expected_v2)
    assert_same_outputs(load_file(tmp_path / "offline-pinned.safetensors"), expected_v1)


def test_convert_allennlp_push_to_hub_uploads_folder_with_model_card(hub, tmp_path):
    from hf_elmo import ElmoModel
    from hf_elmo.convert.bilm_hdf5 import load_model_from_bilm

    output = tmp_path / "converted"
    stdout = run_command(
        [
            str(REPO_ROOT / "conversion" / "convert_allennlp.py"),
            "--options", str(FIXTURES / "options.json"),
            "--weights", str(FIXTURES / "lm_weights.hdf5"),
            "--output", str(output),
            "--push-to-hub", "org/elmo-tiny-allennlp",
        ],  # fmt: skip
        hub_env(hub, tmp_path / "home"),
        cwd=tmp_path,
    )
    assert "pushed http://127.0.0.1" in stdout

    files = hub.files("org/elmo-tiny-allennlp")
    local = {p.name: p.read_bytes() for p in output.iterdir()}
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "README.md", "modeling_elmo.py"):
        assert files[name] == local[name], name
    card = ModelCard(files["README.md"].decode("utf-8"))
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "feature-extraction"
    assert "org/elmo-tiny-allennlp" in card.text
    assert any(path == "/api/validate-yaml" for _, path in hub.state.requests)

    # The pushed files load as the same model the hdf5 gives.
    download = tmp_path / "download"
    download.mkdir()
    for name, content in files.items():
        (download / name).write_bytes(content)
    reference = load_model_from_bilm(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    pulled = ElmoModel.from_pretrained(download).eval()
    tokenizer = tiny_tokenizer()
    assert_same_outputs(encoder_outputs(pulled, tokenizer), encoder_outputs(reference, tokenizer))


def test_embed_of_a_hub_model_is_embed_of_its_local_folder(hub, tmp_path):
    """`hf-elmo embed --model org/name` loads `ElmoModel` from the Hub (AutoTokenizer: the loading registers the Auto
    classes), a local folder an `ElmoBiLm`: the same vectors, bit for bit (both on the kernels)."""
    import numpy as np

    folder = tmp_path / "local"
    tiny_model(seed=3).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    run_python(
        f"""
        from hf_elmo import ElmoModel, ElmoTokenizer
        ElmoModel.from_pretrained({str(folder)!r}).push_to_hub("org/elmo-embed")
        ElmoTokenizer.from_pretrained({str(folder)!r}).push_to_hub("org/elmo-embed")
        """,
        hub_env(hub, tmp_path / "home"), cwd=tmp_path,
    )
    (tmp_path / "in.txt").write_text("小米粥很香。\n他买了小米手机。\n", encoding="utf-8")
    for model, output in (("org/elmo-embed", "hub.npy"), (str(folder), "local.npy")):
        run_command(["-m", "hf_elmo.cli", "embed", "in.txt", output, "--model", model, "--layers", "top"],
                    hub_env(hub, tmp_path / "home"), cwd=tmp_path)
    hub_vectors = np.load(tmp_path / "hub.npy", allow_pickle=False)
    assert np.array_equal(hub_vectors, np.load(tmp_path / "local.npy", allow_pickle=False))
    assert hub_vectors.shape[0] == 2 and np.abs(hub_vectors).max() > 0


def test_convert_elmoformanylangs_push_to_hub_uploads_the_folder(hub, tmp_path):
    """`hf-elmo convert --from elmoformanylangs --push-to-hub` (also the conversion script) uploads exactly the
    converted folder, dictionaries and modelling code included, in one commit."""
    model_dir = paths.FIXTURES / "elmoformanylangs" / "model"
    output = tmp_path / "converted"
    run_command(
        ["-m", "hf_elmo.cli", "convert", str(output), "--from", "elmoformanylangs", "--model-dir", str(model_dir),
         "--push-to-hub", "org/elmo-zh-efml"],
        hub_env(hub, tmp_path / "home"), cwd=tmp_path,
    )
    files = hub.files("org/elmo-zh-efml")
    local = {p.name: p.read_bytes() for p in output.iterdir()}
    assert set(local) <= set(files)
    for name, content in local.items():
        assert files[name] == content, name
    assert {"char_vocab.json", "word_vocab.json", "modeling_elmo.py", "model.safetensors"} <= set(files)
    script = tmp_path / "via-script"
    run_command(
        [str(REPO_ROOT / "conversion" / "convert_elmoformanylangs.py"), "--model-dir", str(model_dir),
         "--output", str(script), "--push-to-hub", "org/elmo-zh-efml-2"],
        hub_env(hub, tmp_path / "home"), cwd=tmp_path,
    )
    assert hub.files("org/elmo-zh-efml-2")["model.safetensors"] == (script / "model.safetensors").read_bytes()


def test_clear_errors_for_missing_repo_revision_weights_and_foreign_model_type(hub, tmp_path):
    from transformers import BertConfig

    model = tiny_model(seed=2)
    model.save_pretrained(tmp_path / "good")
    hub.upload("org/elmo-good", tmp_path / "good")
    model.config.save_pretrained(tmp_path / "config-only")
    hub.upload("org/elmo-no-weights", tmp_path / "config-only")
    BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8).save_pretrained(
        tmp_path / "bert"
    )
    hub.upload("org/bert-tiny", tmp_path / "bert")

    stdout = run_python(
        f"""
        import hf_elmo
        from hf_elmo import ElmoConfig, ElmoModel
        from transformers import AutoModel, AutoTokenizer
        errors = {{
            "repo": attempt(lambda: AutoModel.from_pretrained("org/does-not-exist")),
            "repo_tokenizer": attempt(lambda: AutoTokenizer.from_pretrained("org/does-not-exist")),
            "revision": attempt(lambda: AutoModel.from_pretrained("org/elmo-good", revision="no-such-branch")),
            "commit": attempt(lambda: AutoModel.from_pretrained("org/elmo-good", revision="{"0" * 40}")),
            "weights": attempt(lambda: AutoModel.from_pretrained("org/elmo-no-weights")),
            "weights_local": attempt(lambda: ElmoModel.from_pretrained({str(tmp_path / "config-only")!r})),
            "model_type": attempt(lambda: ElmoModel.from_pretrained("org/bert-tiny")),
            "model_type_config": attempt(lambda: ElmoConfig.from_pretrained({str(tmp_path / "bert")!r})),
            "good": attempt(lambda: AutoModel.from_pretrained("org/elmo-good")),
            # package installed AND the repo's remote code trusted: the shipped files are the package's own
            "good_trusted": attempt(lambda: AutoModel.from_pretrained("org/elmo-good", trust_remote_code=True)),
        }}
        report(errors)
        """,
        hub_env(hub, tmp_path / "home"),
        cwd=tmp_path,
    )
    errors = last_json(stdout)
    assert errors["good"] is None and errors["good_trusted"] is None
    for key in ("repo", "repo_tokenizer"):
        kind, message = errors[key]
        assert kind == "OSError" and "org/does-not-exist" in message and "not a valid model identifier" in message
    for key, revision in (("revision", "no-such-branch"), ("commit", "0" * 40)):
        kind, message = errors[key]
        assert kind == "OSError" and revision in message and "not a valid git identifier" in message
    for key, name in (("weights", "org/elmo-no-weights"), ("weights_local", str(tmp_path / "config-only"))):
        kind, message = errors[key]
        # transformers' own report (issue 41: loading is transformers' loading, no rewritten exception texts).
        assert kind == "OSError" and name in message and "model.safetensors" in message, message
    kind, message = errors["model_type"]
    assert kind == "ValueError" and message.startswith("org/bert-tiny holds a 'bert' model, not an ELMo model")
    kind, message = errors["model_type_config"]
    assert kind == "ValueError" and "holds a 'bert' model" in message


def test_token_classification_push_and_trainer_push_to_hub(hub, tmp_path):
    labels = ["O", "B-LOC", "I-LOC"]
    encoder = tiny_model(seed=3)
    encoder.save_pretrained(tmp_path / "encoder")
    tiny_tokenizer().save_pretrained(tmp_path / "encoder")
    stdout = run_python(
        f"""
        import hf_elmo
        from hf_elmo import ElmoForTokenClassification, ElmoTokenizer
        from transformers import Trainer, TrainingArguments
        torch.manual_seed(0)
        labels = {labels!r}
        tokenizer = ElmoTokenizer.from_pretrained({str(tmp_path / "encoder")!r})
        model = ElmoForTokenClassification.from_pretrained(
            {str(tmp_path / "encoder")!r}, num_labels=3,
            id2label=dict(enumerate(labels)), label2id={{l: i for i, l in enumerate(labels)}},
        )
        words = [["我", "爱", "北京"], ["上海", "很", "大", "啊"]]
        tags = [[0, 0, 1], [1, 0, 0, 0]]
        examples = [{{"words": w, "labels": t}} for w, t in zip(words, tags)] * 4

        def collate(batch):
            encoded = tokenizer([b["words"] for b in batch], is_split_into_words=True, padding=True, return_tensors="pt")
            width = encoded["input_ids"].shape[1]
            encoded["labels"] = torch.tensor([b["labels"] + [-100] * (width - len(b["labels"])) for b in batch])
            return encoded

        args = TrainingArguments(
            output_dir={str(tmp_path / "trainer")!r}, max_steps=2, per_device_train_batch_size=2, report_to=[],
            save_strategy="no", push_to_hub=True, hub_model_id="org/elmo-ner", use_cpu=True,
            remove_unused_columns=False, logging_strategy="no",
        )
        trainer = Trainer(model=model, args=args, train_dataset=examples, data_collator=collate)
        trainer.train()
        commit = trainer.push_to_hub(commit_message="fine-tuned")
        model.push_to_hub("org/elmo-ner-direct")
        tokenizer.push_to_hub("org/elmo-ner-direct")
        model.eval()
        batch = tokenizer(["我爱北京", "上海很大"], padding=True, return_tensors="pt")
        with torch.no_grad():
            save_file({{"logits": model(**batch).logits.contiguous()}}, {str(tmp_path / "pushed.safetensors")!r})
        report({{"commit": str(commit)}})
        """,
        hub_env(hub, tmp_path / "push-home"),
        cwd=tmp_path,
    )
    assert "org/elmo-ner" in last_json(stdout)["commit"]
    config = json.loads(hub.files("org/elmo-ner")["config.json"])
    assert config["id2label"] == {"0": "O", "1": "B-LOC", "2": "I-LOC"}
    assert config["auto_map"]["AutoModelForTokenClassification"] == "modeling_elmo.ElmoForTokenClassification"

    run_python(
        f"""
        import hf_elmo
        from transformers import AutoModelForTokenClassification, AutoTokenizer
        for repo in ("org/elmo-ner", "org/elmo-ner-direct"):
            model = AutoModelForTokenClassification.from_pretrained(repo).eval()
            assert type(model).__name__ == "ElmoForTokenClassification", type(model)
            tokenizer = AutoTokenizer.from_pretrained("org/elmo-ner-direct")
            batch = tokenizer(["我爱北京", "上海很大"], padding=True, return_tensors="pt")
            with torch.no_grad():
                save_file({{"logits": model(**batch).logits.contiguous()}}, {str(tmp_path)!r} + "/" + repo.replace("/", "_") + ".safetensors")
        """,
        hub_env(hub, tmp_path / "pull-home"),
        cwd=tmp_path,
    )
    expected = load_file(tmp_path / "pushed.safetensors")["logits"]
    for name in ("org_elmo-ner", "org_elmo-ner-direct"):
        assert torch.equal(load_file(tmp_path / f"{name}.safetensors")["logits"], expected), name
