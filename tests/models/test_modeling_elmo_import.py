"""Importing the model changes nothing outside it (issue 34): no global optimizer or module hooks, no torch settings,
no random numbers drawn; the only registrations are the package's own Auto classes and pipeline for ELMo. Checked
in a fresh interpreter, before and after `import hf_elmo.models.elmo.modeling_elmo`, and after a model has run and trained."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from paths import REPO_ROOT

SNAPSHOT = """
import json, warnings
import torch
import torch.nn.modules.module as module_hooks
import torch.optim.optimizer as optimizer_hooks
import transformers
from transformers.models.auto import configuration_auto, modeling_auto, tokenization_auto
from transformers.pipelines import PIPELINE_REGISTRY


def auto_mappings():
    mappings = {"CONFIG_MAPPING": configuration_auto.CONFIG_MAPPING, "TOKENIZER_MAPPING": tokenization_auto.TOKENIZER_MAPPING}
    mappings.update({name: value for name, value in vars(modeling_auto).items()
                     if name.startswith("MODEL_") and name.endswith("MAPPING") and hasattr(value, "_extra_content")})
    return {name: {repr(key): repr(value) for key, value in mapping._extra_content.items()}
            for name, mapping in mappings.items()}


def snapshot():
    hooks = {name: len(getattr(module, name)) for module, names in (
        (optimizer_hooks, ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")),
        (module_hooks, ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                        "_global_backward_pre_hooks", "_global_module_registration_hooks",
                        "_global_parameter_registration_hooks", "_global_buffer_registration_hooks")),
    ) for name in names}
    settings = {
        "default_dtype": str(torch.get_default_dtype()), "default_device": str(torch.get_default_device()),
        "grad_enabled": torch.is_grad_enabled(), "inference_mode": torch.is_inference_mode_enabled(),
        "anomaly_detection": torch.is_anomaly_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(), "threads": torch.get_num_threads(),
        "matmul_precision": torch.get_float32_matmul_precision(), "mkldnn": torch.backends.mkldnn.enabled,
        "rng": torch.get_rng_state().tolist(),
        "transformers_verbosity": transformers.logging.get_verbosity(), "warning_filters": len(warnings.filters),
    }
    return {"hooks": hooks, "settings": settings, "auto": auto_mappings(),
            "pipelines": sorted(PIPELINE_REGISTRY.get_supported_tasks())}


before = snapshot()
import hf_elmo.models.elmo.modeling_elmo
after_import = snapshot()
"""

RUN_AND_TRAIN = """
from hf_elmo import ElmoConfig, ElmoForTokenClassification, ElmoModel, ElmoTokenizer
config = ElmoConfig(char_embedding_dim=4, char_cnn_filters=[[1, 4], [2, 8]], num_highway_layers=1, projection_dim=8,
                    lstm_cell_dim=16, num_lstm_layers=2, num_labels=3, freeze_elmo=False)
batch = ElmoTokenizer()([["a", "b", "c"], ["d"]], is_split_into_words=True, padding=True, return_tensors="pt")
state = torch.get_rng_state()  # the models draw their initial weights: not a side effect of importing
for model in (ElmoModel(config), ElmoForTokenClassification(config)):
    model.eval()
    with torch.no_grad():
        model(**batch)  # the kernels make their inference copies
    model.train()
    for fused in (True, False):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
        if isinstance(model, ElmoModel):
            model(**batch).last_hidden_state.sum().backward()
        else:
            model(**batch, labels=torch.zeros(2, 3, dtype=torch.long)).loss.backward()
        optimizer.step()
        assert not optimizer._optimizer_step_pre_hooks and not optimizer._optimizer_step_post_hooks
        assert all(p._post_accumulate_grad_hooks is None and not p._backward_hooks for p in model.parameters())
torch.set_rng_state(state)
after_training = snapshot()
print("@@result@@ " + json.dumps({"before": before, "after_import": after_import, "after_training": after_training}))
"""


@pytest.fixture(scope="module")
def fresh_interpreter() -> dict:
    """Snapshots of a fresh interpreter before and after importing the model, and after using it."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "warning"}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SNAPSHOT) + textwrap.dedent(RUN_AND_TRAIN)],
                            env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("@@result@@ "))
    return json.loads(line.split(" ", 1)[1])


def test_importing_and_using_the_model_registers_no_hook_and_changes_no_torch_setting(fresh_interpreter):
    result = fresh_interpreter
    before = result["before"]
    assert not any(before["hooks"].values()), before["hooks"]  # the check starts from a clean process
    for stage in ("after_import", "after_training"):
        assert result[stage]["hooks"] == before["hooks"], stage
        assert result[stage]["settings"] == before["settings"], stage


def test_importing_the_model_registers_only_elmo_with_transformers(fresh_interpreter):
    """The hf_elmo package registers ElmoConfig's Auto classes and the elmo pipeline on purpose; nothing else of
    transformers' registries may change (another model type's mapping, a stock pipeline)."""
    result = fresh_interpreter
    before, after = result["before"], result["after_import"]
    added = {}
    for name, mapping in after["auto"].items():
        previous = before["auto"].get(name, {})
        assert {key: previous[key] for key in previous} == {key: mapping[key] for key in previous}, name
        added.update({f"{name}[{key}]": value for key, value in mapping.items() if key not in previous})
    assert added and all("ElmoConfig" in key.split("[", 1)[1] or "'elmo'" in key for key in added), added
    assert all("Elmo" in value or "elmo" in value for value in added.values()), added
    new_tasks = set(after["pipelines"]) - set(before["pipelines"])
    assert set(before["pipelines"]) <= set(after["pipelines"]) and all("elmo" in task for task in new_tasks), new_tasks
