"""sentence-transformers: the folder save_sentence_transformer writes loads with SentenceTransformer(dir,
trust_remote_code=True), where hf-elmo is not importable, and encode(texts) equals Embedder.sentence_vectors(texts).

Needs the sentence-transformers package (`pip install -e '.[sentence-transformers]'`): without it these tests fail
at collection, naming the package, rather than skip.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import sentence_transformers  # noqa: F401
except ImportError:
    pytest.fail("tests/integrations/test_sentence_transformers.py needs the sentence-transformers package: "
                "pip install -e '.[sentence-transformers]'", pytrace=False)
from sentence_transformers import SentenceTransformer

from hf_elmo.integrations.embedder import Embedder
from hf_elmo.integrations import elmo_sentence_encoder
from hf_elmo.integrations.sentence_transformers import (
    DEFAULT_LAYERS,
    DEFAULT_POOLING,
    POOLING_MODES,
    import_sentence_transformers,
    save_sentence_transformer,
)
from hub_helpers import last_json, run_python, tiny_model, tiny_tokenizer
from numerics import bilm_tolerance
from paths import REPO_ROOT

# More texts than one sentence-transformers batch (32) and of different lengths, an empty one, a non-Chinese one.
TEXTS = (REPO_ROOT / "docs" / "examples" / "xiaomi.txt").read_text(encoding="utf-8").split()
TEXTS += (REPO_ROOT / "docs" / "examples" / "xiaomi_more.txt").read_text(encoding="utf-8").split()
TEXTS += ["", "hello world , ELMo here !", "好"]


def isolated_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE")) and k != "PYTHONPATH"}
    env.update(HF_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A small random model with a learned mix that is not the plain average, saved with its tokenizer."""
    folder = tmp_path_factory.mktemp("tiny") / "elmo"
    tiny_model(seed=5).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def test_shipped_model_loads_without_hf_elmo_and_encodes_as_the_embedder(tmp_path):
    folder = save_sentence_transformer("default", tmp_path / "elmo-st")
    stdout = run_python(
        f"""
        import numpy as np
        from sentence_transformers import SentenceTransformer
        texts = {TEXTS!r}
        found = {{"needs_trust": attempt(lambda: SentenceTransformer({str(folder)!r}))}}
        model = SentenceTransformer({str(folder)!r}, trust_remote_code=True, device="cpu")
        vectors = model.encode(texts)
        found["modules"] = [type(model[0]).__module__, type(model[0].model).__module__, type(model[1]).__name__]
        found["dimension"] = model.get_embedding_dimension()
        found["vectors"] = vectors.tolist()
        model.save({str(tmp_path / "saved-again")!r})  # the re-saved folder loads the same way
        again = SentenceTransformer({str(tmp_path / "saved-again")!r}, trust_remote_code=True, device="cpu")
        found["saved_again_equal"] = bool(np.array_equal(again.encode(texts), vectors))
        report(found)
        """,
        isolated_env(tmp_path / "home"), cwd=tmp_path, isolated=True,
    )
    found = last_json(stdout)
    kind, message = found["needs_trust"]
    assert kind == "ValueError" and "trust_remote_code=True" in message
    encoder_module, model_module, pooling = found["modules"]
    assert encoder_module.startswith("transformers_modules.") and encoder_module.endswith(".elmo_sentence_encoder")
    assert model_module.startswith("transformers_modules.") and model_module.endswith(".modeling_elmo")
    assert pooling == "Pooling" and found["saved_again_equal"]

    embedder = Embedder("default", device="cpu")
    expected = embedder.sentence_vectors(TEXTS)
    vectors = np.asarray(found["vectors"], dtype=np.float32)
    assert found["dimension"] == embedder.dim and vectors.shape == expected.shape
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=bilm_tolerance(embedder.config, expected))
    assert not vectors[TEXTS.index("")].any()
    # The folder is an hf-elmo model folder too: the Embedder reads it as the shipped model.
    np.testing.assert_array_equal(Embedder(str(folder), device="cpu").sentence_vectors(TEXTS), expected)


@pytest.mark.parametrize("layers", ["top", "mix", 0, 1, -2])
def test_each_layer_choice_gives_the_embedders_sentence_vectors(tiny_folder, tmp_path, layers):
    folder = save_sentence_transformer(tiny_folder, tmp_path / "st", layers=layers)
    assert json.loads((folder / elmo_sentence_encoder.CONFIG_FILE).read_text()) == {"layers": layers}
    vectors = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu").encode(TEXTS)
    embedder = Embedder(str(tiny_folder), device="cpu")
    expected = embedder.sentence_vectors(TEXTS, layers=layers)
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=bilm_tolerance(embedder.config, expected))
    if layers == "mix":  # the mix is not the default average: a choice that was not honoured would show
        assert np.abs(expected - embedder.sentence_vectors(TEXTS)).max() > 100 * bilm_tolerance(embedder.config, expected)


def test_max_pooling_is_the_maximum_over_each_texts_words(tiny_folder, tmp_path):
    folder = save_sentence_transformer(tiny_folder, tmp_path / "st", pooling="max")
    texts = [text for text in TEXTS if text]
    vectors = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu").encode(texts)
    embedder = Embedder(str(tiny_folder), device="cpu")
    expected = np.stack([words.max(axis=0) for words in embedder.embed(texts, layers=DEFAULT_LAYERS)])
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=bilm_tolerance(embedder.config, expected))


def test_defaults_are_the_same_on_both_sides(tiny_folder, tmp_path):
    assert inspect.signature(Embedder.sentence_vectors).parameters["layers"].default == DEFAULT_LAYERS
    assert inspect.signature(save_sentence_transformer).parameters["layers"].default == DEFAULT_LAYERS
    assert inspect.signature(elmo_sentence_encoder.ElmoWordEmbeddings).parameters["layers"].default == DEFAULT_LAYERS
    assert DEFAULT_POOLING == "mean"  # Embedder.sentence_vectors' masked mean
    folder = save_sentence_transformer(tiny_folder, tmp_path / "st")
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == "mean" and pooling["embedding_dimension"] == 2 * tiny_model(0).config.projection_dim
    modules = json.loads((folder / "modules.json").read_text())
    assert modules[0]["type"] == "elmo_sentence_encoder.ElmoWordEmbeddings" and modules[0]["path"] == ""
    assert (folder / "elmo_sentence_encoder.py").read_bytes() == Path(elmo_sentence_encoder.__file__).read_bytes()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "trust_remote_code=True" in readme and "library_name: sentence-transformers" in readme


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"pooling": "cls"}, ValueError, ["pooling", "'mean'", "'max'", "'cls'"]),
        ({"layers": 3}, ValueError, ["layer index 3", "0..2"]),
        ({"layers": "all"}, ValueError, ["'average'", "'all'"]),
        ({"layers": 1.0}, TypeError, ["layers"]),
    ],
)
def test_bad_options_are_refused_and_write_nothing(tiny_folder, tmp_path, options, error, words):
    with pytest.raises(error) as raised:
        save_sentence_transformer(tiny_folder, tmp_path / "st", **options)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert os.listdir(tmp_path) == []


def test_mix_needs_a_model_with_a_mix(tmp_path):
    folder = tmp_path / "no-mix"
    tiny_model(seed=0, num_output_representations=0).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    with pytest.raises(ValueError, match="num_output_representations"):
        save_sentence_transformer(folder, tmp_path / "st", layers="mix")
    assert not (tmp_path / "st").exists()


def test_an_existing_folder_is_kept_unless_overwrite(tiny_folder, tmp_path):
    target = tmp_path / "st"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already exists"):
        save_sentence_transformer(tiny_folder, target)
    assert os.listdir(target) == ["keep.txt"]
    # Issue 37: --overwrite replaces only hf-elmo's own outputs, never a folder of the user's.
    with pytest.raises(ValueError, match="no output folder of hf-elmo"):
        save_sentence_transformer(tiny_folder, target, overwrite=True)
    assert os.listdir(target) == ["keep.txt"]
    (target / "keep.txt").unlink()
    target.rmdir()
    save_sentence_transformer(tiny_folder, target)
    save_sentence_transformer(tiny_folder, target, overwrite=True)  # a previous export is replaced
    assert (target / "modules.json").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["st"]  # no temporary left beside it


def test_module_file_imports_only_torch_transformers_and_sentence_transformers():
    source = Path(elmo_sentence_encoder.__file__).read_text(encoding="utf-8")
    for match in re.finditer(r"^\s*(?:from|import)\s+([\w.]+)", source, flags=re.MULTILINE):
        top = match.group(1).split(".")[0]
        assert top in {"torch", "transformers", "sentence_transformers", "__future__"} | sys.stdlib_module_names, top


def test_missing_package_is_one_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=re.escape('pip install -e ".[sentence-transformers]"')):
        import_sentence_transformers()


def test_pooling_modes_are_those_sentence_transformers_knows():
    from sentence_transformers.sentence_transformer.modules import Pooling

    assert set(POOLING_MODES) <= set(Pooling.POOLING_MODES)


def test_the_export_command_writes_the_folder(tmp_path):
    """`hf-elmo export --format sentence-transformers` writes what save_sentence_transformer does."""
    from hf_elmo.cli import main as command

    assert command(["export", "--format", "sentence-transformers", "--model", "default", "--output",
                    str(tmp_path / "st"), "--layers", "top"]) == 0
    folder = tmp_path / "st"
    assert (folder / "modules.json").is_file() and (folder / "config.json").is_file()
    assert command(["export", "--format", "sentence-transformers", "--model", "default", "--output",
                    str(folder)]) == 2  # exists, no --overwrite
