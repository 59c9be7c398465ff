"""Faults of issue 37: what the commands write, replace, lock, sweep and load when things go wrong."""

from __future__ import annotations

import os
import stat

import pytest

from hf_elmo import cli
from helpers_embed import save_tiny_model


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-elmo"))


# 15: the user's umask ------------------------------------------------------------------------


def test_converted_weights_get_the_umask_permissions_like_every_other_file(tmp_path, model_dir):
    bilm = tmp_path / "bilm"
    assert run("convert", "--to", "allennlp", "--model", model_dir, bilm) == 0
    output = tmp_path / "converted"
    previous = os.umask(0o022)
    try:
        assert run("convert", "--from", "allennlp", "--options", bilm / "options.json",
                   "--weights", bilm / "weights.hdf5", output) == 0
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in output.iterdir()}
    assert modes["model.safetensors"] == 0o644
    assert set(modes.values()) == {0o644}


# 2: --overwrite replaces only regular files and folders of ours -------------------------------


def make_special(path, kind: str, elsewhere):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "symlink":
        os.symlink(elsewhere, path)
    elif kind == "dangling symlink":
        os.symlink(elsewhere.parent / "nowhere", path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("mknod of a device needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


SPECIALS = ["fifo", "socket", "symlink", "dangling symlink", "device"]


def assert_untouched(path, kind):
    mode = os.lstat(path).st_mode
    assert {"fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "symlink": stat.S_ISLNK, "dangling symlink": stat.S_ISLNK,
            "device": stat.S_ISCHR}[kind](mode)


# Each command that writes one output file: the text it reads and its arguments (input, output, model folder).
OVERWRITING_COMMANDS = {
    "embed": ("小米 粥\n", lambda text, output, model: ["embed", text, output, "--overwrite", "--model", model]),
    "corpus segment": ("我们喝小米粥\n", lambda text, output, model: [
        "corpus", "segment", "--input", text, "--output", output, "--segmenter", "chars", "--overwrite"]),
}


@pytest.mark.parametrize("command", sorted(OVERWRITING_COMMANDS))
@pytest.mark.parametrize("kind", SPECIALS)
def test_overwrite_refuses_special_files_by_name(tmp_path, model_dir, kind, command, capsys):
    content, arguments = OVERWRITING_COMMANDS[command]
    text = tmp_path / "in.txt"
    text.write_text(content, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("someone else's")
    output = tmp_path / "out"
    make_special(output, kind, elsewhere)
    assert run(*arguments(text, output, model_dir)) == 2
    assert str(output) in capsys.readouterr().err
    assert_untouched(output, kind)
    assert elsewhere.read_text() == "someone else's"


def test_atomic_file_refuses_a_special_file_made_while_writing(tmp_path):
    from hf_elmo.utils.io import atomic_file

    output = tmp_path / "out.txt"
    with pytest.raises(ValueError, match="FIFO"):
        with atomic_file(output) as temporary:
            open(temporary, "w").close()
            os.mkfifo(output)
    assert stat.S_ISFIFO(os.lstat(output).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_convert_overwrite_refuses_folders_that_are_not_outputs(tmp_path, model_dir, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    assert run("convert", "--to", "allennlp", "--model", model_dir, home, "--overwrite") == 2
    assert "no output folder of hf-elmo" in capsys.readouterr().err
    assert (home / "thesis.tex").read_text() == "years of work"
    link = tmp_path / "link"
    os.symlink(home, link)
    assert run("convert", "--to", "allennlp", "--model", model_dir, link, "--overwrite") == 2
    assert "symbolic link" in capsys.readouterr().err
    assert os.path.islink(link)
    output = tmp_path / "bilm"
    assert run("convert", "--to", "allennlp", "--model", model_dir, output) == 0
    os.mkfifo(output / "pipe")
    assert run("convert", "--to", "allennlp", "--model", model_dir, output, "--overwrite") == 2
    assert "FIFO" in capsys.readouterr().err
    (output / "pipe").unlink()
    assert run("convert", "--to", "allennlp", "--model", model_dir, output, "--overwrite") == 0


# 6: one writer per output ------------------------------------------------------------------------

HOLD_THE_LOCK = """
import sys, time
from hf_elmo.utils.io import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def hold_lock(target):
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(target)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_run_into_the_same_output_is_refused_naming_the_first(tmp_path, model_dir, capsys):
    import signal
    import socket

    text = tmp_path / "in.txt"
    text.write_text("小米 粥\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    first = hold_lock(output)
    try:
        assert run("embed", text, output, "--model", model_dir) == 2
        error = capsys.readouterr().err
        assert f"pid {first.pid} on {socket.gethostname()}, started " in error and str(output) in error
        assert not output.exists()
        assert run("convert", "--to", "allennlp", "--model", model_dir, output) == 2  # the same name as a folder
        assert f"pid {first.pid}" in capsys.readouterr().err
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the kernel released the killed run's lock: the next run takes it over, and leaves no lock file
    assert run("embed", text, output, "--model", model_dir) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.hdf5"]


def test_corpus_segment_and_vocab_hold_the_lock(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("我们 喝 小米粥\n", encoding="utf-8")
    output = tmp_path / "out.txt"
    first = hold_lock(output)
    try:
        assert run("corpus", "segment", "--input", text, "--output", output, "--segmenter", "chars") == 2
        assert f"pid {first.pid}" in capsys.readouterr().err
        assert run("corpus", "vocab", "--corpus", text, "--output", output) == 2
        assert f"pid {first.pid}" in capsys.readouterr().err
    finally:
        first.kill()
        first.wait()
    assert not output.exists()


@pytest.mark.parametrize("what_appears", ["another run's output", "an empty folder"])
def test_a_folder_output_does_not_replace_one_that_appeared_while_it_was_built(tmp_path, what_appears):
    from hf_elmo.utils.io import AtomicDirectory

    target = tmp_path / "out"
    with pytest.raises(FileExistsError, match="appeared while writing it"):
        with AtomicDirectory(target) as folder:
            (folder / "config.json").write_text("mine")
            target.mkdir()  # what a slow run finds when it is done
            if what_appears == "another run's output":
                (target / "config.json").write_text("theirs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in target.iterdir()] == ([] if what_appears == "an empty folder" else ["config.json"])


# 8: the dtype on load is the command's -------------------------------------------------------------


@pytest.mark.parametrize("saved_dtype", ["bfloat16", "float16"])
def test_a_dtype_in_config_json_does_not_change_what_the_commands_compute_in(tmp_path, model_dir, saved_dtype, capsys):
    import json
    import shutil

    import h5py
    import numpy as np

    marked = tmp_path / "marked"
    shutil.copytree(model_dir, marked)
    config = json.loads((marked / "config.json").read_text())
    config["dtype"] = saved_dtype
    (marked / "config.json").write_text(json.dumps(config))
    text = tmp_path / "in.txt"
    text.write_text("小米 粥 很 好喝\n", encoding="utf-8")
    for name, model in (("plain.hdf5", model_dir), ("marked.hdf5", marked)):
        assert run("embed", text, tmp_path / name, "--model", model) == 0
    with h5py.File(tmp_path / "plain.hdf5") as plain, h5py.File(tmp_path / "marked.hdf5") as other:
        np.testing.assert_array_equal(plain["0"][...], other["0"][...])
    capsys.readouterr()
    assert run("info", "--json", "--model", marked) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "float32"
    assert run("convert", "--to", "allennlp", "--model", marked, tmp_path / "bilm") == 0
    assert run("convert", "--to", "allennlp", "--model", model_dir, tmp_path / "bilm-plain") == 0
    assert (tmp_path / "bilm" / "weights.hdf5").read_bytes() == (tmp_path / "bilm-plain" / "weights.hdf5").read_bytes()


# 5: a dictionary-scheme model without tokenizer_config.json ---------------------------------------------


def shipped_without_tokenizer_config(tmp_path):
    import shutil

    from hf_elmo import DEFAULT_MODEL

    folder = tmp_path / "no-tokenizer-config"
    shutil.copytree(DEFAULT_MODEL, folder)
    (folder / "tokenizer_config.json").unlink()
    return folder


def test_a_dictionary_model_without_tokenizer_config_gets_its_dictionary(tmp_path, capsys):
    import h5py
    import numpy as np

    from hf_elmo import DEFAULT_MODEL

    folder = shipped_without_tokenizer_config(tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("小米 粥 很 好喝\n", encoding="utf-8")
    for name, model in (("shipped.hdf5", DEFAULT_MODEL), ("bare.hdf5", folder)):
        assert run("embed", text, tmp_path / name, "--split", "whitespace", "--model", model) == 0
    with h5py.File(tmp_path / "shipped.hdf5") as shipped, h5py.File(tmp_path / "bare.hdf5") as bare:
        np.testing.assert_array_equal(shipped["0"][...], bare["0"][...])
    capsys.readouterr()
    assert run("info", "--json", "--model", folder) == 0


@pytest.mark.parametrize("damage", ["missing", "not a mapping"])
def test_a_dictionary_model_whose_vocabulary_cannot_be_read_is_refused_naming_it(tmp_path, damage, capsys):
    folder = shipped_without_tokenizer_config(tmp_path)
    if damage == "missing":
        (folder / "char_vocab.json").unlink()
    else:
        (folder / "char_vocab.json").write_text("[1, 2]")
    text = tmp_path / "in.txt"
    text.write_text("小米\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--model", folder) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("hf-elmo: error: ") and "char_vocab.json" in error[-1]
    assert not (tmp_path / "out.hdf5").exists()


# 1: weights that are not the model's are refused by every command ----------------------------------------


def rewritten_weights(tmp_path, model_dir, keep):
    """A copy of the model whose model.safetensors holds only the tensors `keep(name, tensor)` returns (a
    (name, tensor) pair or None), rewritten with safetensors' own writer (as another tool would leave it)."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "rewritten"
    shutil.copytree(model_dir, folder)
    kept = dict(filter(None, (keep(name, tensor) for name, tensor in load_file(folder / "model.safetensors").items())))
    save_file(kept, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


WEIGHT_DAMAGE = {
    "no biLSTM": lambda name, tensor: None if name.startswith("bilstm.") else (name, tensor),
    "foreign names": lambda name, tensor: (f"encoder.{name}", tensor),
    "an extra tensor": lambda name, tensor: (name, tensor) if name != "char_encoder.projection.bias" else (
        "char_encoder.projection.bias_v2", tensor),
}


@pytest.mark.parametrize("damage", list(WEIGHT_DAMAGE))
def test_embed_info_and_export_refuse_weights_that_are_not_the_models(tmp_path, model_dir, damage, capsys):
    folder = rewritten_weights(tmp_path, model_dir, WEIGHT_DAMAGE[damage])
    text = tmp_path / "in.txt"
    text.write_text("小米 粥\n", encoding="utf-8")
    attempts = {
        "embed": ["embed", text, tmp_path / "out.hdf5", "--model", folder],
        "similar": ["similar", "--corpus", text, "--types", "--word", "小", "--min-count", "1", "--model", folder],
        "info": ["info", "--model", folder],
        "convert": ["convert", "--to", "allennlp", "--model", folder, tmp_path / "bilm"],
    }
    for command, argv in attempts.items():
        capsys.readouterr()
        assert run(*argv) == 2, command
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith("hf-elmo: error: ") and str(folder / "model.safetensors") in last, (command, last)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "rewritten"]


def test_checkpoints_with_a_head_still_load_as_the_encoder(tmp_path, model_dir):
    from hf_elmo import ElmoTokenizer
    from hf_elmo.models.elmo.modeling_elmo import ElmoForTokenClassification

    tagger = ElmoForTokenClassification.from_pretrained(model_dir, num_labels=3)
    tagger.save_pretrained(tmp_path / "tagger")
    ElmoTokenizer(segmenter="chars").save_pretrained(tmp_path / "tagger")
    text = tmp_path / "in.txt"
    text.write_text("小米 粥\n", encoding="utf-8")
    assert run("embed", text, tmp_path / "out.hdf5", "--model", tmp_path / "tagger") == 0
    assert run("convert", "--to", "allennlp", "--model", tmp_path / "tagger", tmp_path / "bilm") == 0


# 10: failed allocations are one line; hdf5 datasets are checked from their metadata -------------------------


TORCH_OUT_OF_MEMORY = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                       "tried to allocate 40000000000 bytes. Error code 12 (Cannot allocate memory)")


def test_a_failed_allocation_is_one_line_naming_what_was_built(tmp_path, model_dir, monkeypatch, capsys):
    import hf_elmo.loading
    from hf_elmo.models.elmo.bilm_elmo import ElmoBiLmMixin  # the forward of ElmoModel and of the commands' ElmoBiLm

    text = tmp_path / "in.txt"
    text.write_text("小米 粥\n", encoding="utf-8")

    def no_memory(self, *args, **kwargs):
        raise RuntimeError(TORCH_OUT_OF_MEMORY)

    with monkeypatch.context() as patch:
        patch.setattr(ElmoBiLmMixin, "forward", no_memory)
        assert run("embed", text, tmp_path / "out.hdf5", "--model", model_dir, "--batch-size", 8) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith("hf-elmo: error: not enough memory for the vectors of a batch of 8 sentence(s)")
        assert "--batch-size" in last
        assert run("similar", "--corpus", text, "--types", "--word", "小", "--model", model_dir) == 2
        assert "not enough memory for the vectors" in capsys.readouterr().err

    def numpy_out_of_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 37.3 GiB for an array with shape (100000, 100000) and data type float32")

    monkeypatch.setattr(hf_elmo.loading, "load_bilm", numpy_out_of_memory)  # a local folder's encoder
    assert run("info", "--model", model_dir) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"hf-elmo: error: not enough memory for the model {model_dir}") and "37.3 GiB" in last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def bilm_weights_with(tmp_path, name, make):
    """The AllenNLP fixture's weights.hdf5 with dataset `name` replaced by `make(h5py file, name)`."""
    import shutil

    import h5py

    from helpers_embed import FIXTURES

    weights = tmp_path / "weights.hdf5"
    shutil.copy(FIXTURES / "lm_weights.hdf5", weights)
    with h5py.File(weights, "r+") as handle:
        del handle[name]
        make(handle, name)
    return FIXTURES / "options.json", weights


def test_convert_refuses_a_huge_dataset_by_its_shape_without_reading_it(tmp_path, monkeypatch, capsys):
    import h5py

    options, weights = bilm_weights_with(tmp_path, "char_embed",
                                         lambda handle, name: handle.create_dataset(name, (100_000, 100_000), "f4"))
    assert weights.stat().st_size < 2_000_000  # never written: the dataset's values are not in the file

    def no_reading(self, *args):
        raise AssertionError("dataset values were read before the layout was checked")

    monkeypatch.setattr(h5py.Dataset, "__getitem__", no_reading)
    output = tmp_path / "out"
    assert run("convert", "--from", "allennlp", "--options", options, "--weights", weights, output) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "dataset char_embed has shape (100000, 100000)" in last and str(weights) in last
    assert not output.exists()


def test_convert_names_a_string_typed_dataset(tmp_path, capsys):
    import h5py

    def strings(handle, name):  # the shape the options expect, of strings
        handle.create_dataset(name, data=["0.5"] * 4, dtype=h5py.string_dtype())

    options, weights = bilm_weights_with(tmp_path, "CNN/b_cnn_0", strings)
    assert run("convert", "--from", "allennlp", "--options", options, "--weights", weights, tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "dataset CNN/b_cnn_0 holds strings" in last and str(weights) in last


def test_an_impossible_model_size_is_one_line_from_any_command(tmp_path, capsys):
    """Refused by the configuration's size bound before any module is built (no allocation is even tried)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\nd e f\n", encoding="utf-8")
    assert run("pretrain", "--train-file", corpus, "--min-count", 1, "--output-dir", tmp_path / "run",
               "--cell-dim", 1_000_000_000, "--projection-dim", 16, "--max-steps", 1, "--no-progress") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("hf-elmo: error: Invalid ElmoConfig: this architecture has about") and "--cell-dim" in last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


# 14: one line reader: \n, \r\n and a lone \r end a line -------------------------------------------------


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 7, 1 << 20])
def test_the_streaming_line_reader_splits_as_the_whole_file_reader(tmp_path, chunk_bytes):
    from hf_elmo.utils.io import iter_text_lines, split_text_lines

    data = "\ufeff小米\r粥\r\n\r\n好喝\n\r最后".encode()
    path = tmp_path / "mixed.txt"
    path.write_bytes(data)
    whole = [line.decode() for line in split_text_lines(data)]
    assert whole == ["\ufeff小米", "粥", "", "好喝", "", "最后"]
    assert [text for _, text in iter_text_lines(path, chunk_bytes=chunk_bytes)] == ["小米"] + whole[1:]
    path.write_bytes(b"ok\r\xff\xfe\r")
    with pytest.raises(ValueError, match=f"{path}:2: not valid UTF-8"):
        list(iter_text_lines(path, chunk_bytes=chunk_bytes))


def test_cr_only_line_ends_are_lines_for_embed_similar_and_corpus_segment(tmp_path, model_dir, capsys):
    import json

    import h5py

    text = tmp_path / "mac.txt"
    text.write_bytes("小米 粥\r小米 手机\r好 喝\r".encode())
    assert run("embed", text, tmp_path / "out.hdf5", "--split", "whitespace", "--model", model_dir) == 0
    with h5py.File(tmp_path / "out.hdf5") as handle:
        assert sorted(json.loads(handle["sentence_to_index"][0])) == ["好 喝", "小米 手机", "小米 粥"]
    capsys.readouterr()
    assert run("similar", "--corpus", text, "--sentence", "小米 粥", "--word", "小米", "--same-word", "--json",
               "--split", "whitespace", "--model", model_dir) == 0
    assert sorted(item["line"] for item in json.loads(capsys.readouterr().out)) == [1, 2]
    output = tmp_path / "segmented.txt"
    assert run("corpus", "segment", "--input", text, "--output", output, "--segmenter", "whitespace") == 0
    assert output.read_text(encoding="utf-8") == "小米 粥\n小米 手机\n好 喝\n"


# 16: messages name the file ----------------------------------------------------------------------------


def test_invalid_utf8_in_the_shopping_csv_is_named_with_its_line(tmp_path, capsys):
    csv = tmp_path / "shop.csv"
    csv.write_bytes("cat,label,review\n手机,1,好\n手机,0,".encode() + b"\xff\xfe bad\n")
    assert run("corpus", "shopping", "--input", csv, "--output-dir", tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"hf-elmo: error: {csv}:3: not valid UTF-8")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_invalid_char_dic_is_named_with_its_line(tmp_path, capsys):
    import shutil

    from paths import FIXTURES

    model = tmp_path / "model"
    shutil.copytree(FIXTURES / "elmoformanylangs" / "model", model)
    dictionary = model / "char.dic"
    dictionary.write_bytes(dictionary.read_bytes() + b"\xc3\x28\t999\n")
    lines = dictionary.read_bytes().count(b"\n")
    assert run("convert", "--from", "elmoformanylangs", "--model-dir", model, tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"hf-elmo: error: {dictionary}:{lines}: not valid UTF-8")


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_a_second_training_run_into_the_same_output_is_refused_naming_the_first(tmp_path, capsys, command):
    """Issue 37 #6: two pretrain runs into one folder both exited 0 and the folder held the second one's model.
    While another process holds the output (as a running training run does), a run is refused naming it."""
    import subprocess
    import sys

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\nd e f\n", encoding="utf-8")
    output = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom hf_elmo.utils.io import output_lock\n"
         "with output_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)", str(output)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        argv = (["pretrain", "--train-file", corpus, "--min-count", 1, "--output-dir", output, "--max-steps", 1]
                if command == "pretrain" else
                ["finetune", "train-classifier", "--train", corpus, "--output-dir", output, "--max-steps", 1])
        assert run(*argv) == 2
    finally:
        holder.kill()
        holder.wait()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "is being written by another hf-elmo run" in last and f"pid {holder.pid} on " in last
    assert not output.exists()
