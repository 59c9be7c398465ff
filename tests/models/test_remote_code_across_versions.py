"""Issue 43: folders saved by hf-elmo load as remote code under the other major version of transformers.

`HF_ELMO_OTHER_PYTHON` names the Python of an environment with another transformers (and without hf-elmo
importable there: the subprocess hides it). .ci/run sets it both ways: in the transformers 5.x run to its 4.x
environment (folders saved by the 5.x package, loaded by transformers 4.x), and in the 4.x run to the 5.x environment.
Unset, the same interpreter runs the remote code, still without the package.
"""

from __future__ import annotations

import os
import textwrap

import torch
import transformers
from safetensors.torch import load_file

from hf_elmo import ElmoConfig, ElmoForSequenceClassification, ElmoForTokenClassification
from hub_helpers import SENTENCES, last_json, run_python, tiny_model, tiny_tokenizer

OTHER_PYTHON = os.environ.get("HF_ELMO_OTHER_PYTHON")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# Folder -> (auto class, package class, head fields): an encoder, a tagger (BiLSTM + CRF) and a sentence classifier.
# (The character tagger's pipeline runs as remote code in test_remote_code.py, which CI runs on both transformers.)
MODELS = {
    "encoder": ("AutoModel", None, {}),
    "tagger": ("AutoModelForTokenClassification", ElmoForTokenClassification,
               {"use_crf": True, "task_encoder": "bilstm", "task_encoder_hidden_size": 6}),
    "classifier": ("AutoModelForSequenceClassification", ElmoForSequenceClassification,
                   {"classifier_hidden_size": 5}),
}


# Every layer, the mixes and the head's logits for SENTENCES: run here and, as source, in the subprocess.
OUTPUTS = """
def outputs(model, tokenizer):
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    tensors = {f"layer{i}": h for i, h in enumerate(out.hidden_states)}
    for key in ("logits", "mixes"):
        if getattr(out, key, None) is not None:
            tensors[key] = out[key]
    return {key: value.contiguous() for key, value in tensors.items()}
"""
_namespace = {"torch": torch, "SENTENCES": SENTENCES}
exec(OUTPUTS, _namespace)
outputs = _namespace["outputs"]


def offline_env(tmp_path) -> dict[str, str]:
    """This environment without PYTHONPATH and Hub settings; offline, the folders are local."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE")) and k != "PYTHONPATH"}
    return {**env, "HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
            "TRANSFORMERS_VERBOSITY": "error", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def test_saved_models_compute_the_same_numbers_as_remote_code_of_the_other_transformers(tmp_path):
    tokenizer = tiny_tokenizer()
    encoder = tiny_model(seed=4)
    base = ElmoConfig.to_dict(encoder.config)
    expected = {}
    for name, (_, model_class, fields) in MODELS.items():
        if model_class is None:
            model = encoder
        else:
            torch.manual_seed(7)
            config = ElmoConfig(**{**base, **fields, "id2label": dict(enumerate(LABELS)),
                                   "label2id": {label: i for i, label in enumerate(LABELS)}})
            model = model_class(config)
            model.elmo.load_state_dict(encoder.state_dict())
            with torch.no_grad():  # the CRF starts at zero: it would compare little
                for parameter in model.parameters():
                    if not parameter.any():
                        parameter.normal_(0, 0.5)
        model.eval().set_lstm_implementation("reference")  # the remote files' own path: the same numbers exactly
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
        expected[name] = outputs(model, tokenizer)

    auto_classes = {name: auto_class for name, (auto_class, _, _) in MODELS.items()}
    code = OUTPUTS + textwrap.dedent(f"""
        import transformers
        from transformers import AutoTokenizer
        found = {{"transformers": transformers.__version__, "classes": {{}}}}
        for name, auto_class in {auto_classes!r}.items():
            folder = {str(tmp_path)!r} + "/" + name
            model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
            found["classes"][name] = [type(model).__module__, type(model).__name__, type(tokenizer).__name__]
            save_file(outputs(model, tokenizer), folder + ".safetensors")
        report(found)
        """)
    stdout = run_python(code, offline_env(tmp_path), cwd=tmp_path, isolated=True, python=OTHER_PYTHON)
    found = last_json(stdout)
    if OTHER_PYTHON:  # the point of the test: the other major version of transformers
        assert found["transformers"].split(".")[0] != transformers.__version__.split(".")[0], found["transformers"]
    for name, (_, model_class, _) in MODELS.items():
        module, class_name, tokenizer_class = found["classes"][name]
        assert module.startswith("transformers_modules.")  # remote code, not the package
        assert (class_name, tokenizer_class) == ((model_class or type(encoder)).__name__, "ElmoTokenizer")
        assert ("logits" in expected[name]) == (model_class is not None)  # the heads' own outputs are compared too
        got = load_file(tmp_path / f"{name}.safetensors")
        assert sorted(got) == sorted(expected[name]), name
        for key, value in expected[name].items():
            assert torch.equal(got[key], value), (name, key, float((got[key] - value).abs().max()))
