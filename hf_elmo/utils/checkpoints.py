"""Runs as pretraining and fine-tuning record and resume them: the identity a run folder records (its options,
refused if a resume differs), the checkpoint a run resumes from, whether its files can be read, its step and the loss
sum kept in it. A run writes its folder under the output's one lock (`utils.io.output_lock`)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import zipfile
from pathlib import Path


def _save_finished(checkpoint: Path) -> bool:
    return (checkpoint / "trainer_state.json").is_file()  # the Trainer writes it last


def remove_incomplete_checkpoints(folder: str | os.PathLike) -> list[str]:
    """Delete the Trainer checkpoints in `folder` whose save never finished (no trainer_state.json, which Trainer
    writes last); returns their names."""
    removed = []
    for checkpoint in sorted(Path(folder).glob("checkpoint-*")):
        if checkpoint.is_dir() and not _save_finished(checkpoint):
            shutil.rmtree(checkpoint, ignore_errors=True)
            removed.append(checkpoint.name)
    return removed


def last_complete_checkpoint(folder: str | os.PathLike) -> str | None:
    """The checkpoint a run in `folder` resumes from: the newest ``checkpoint-N`` whose save finished (Trainer writes
    trainer_state.json last); None if there is none. Not transformers' `get_last_checkpoint`: that one picks a
    checkpoint whose save never finished, and importing it imports torch, which the line printed after a Ctrl-C
    (perhaps in the middle of torch's import, which then cannot be imported again) must not."""
    complete = [path for path in Path(folder).glob("checkpoint-*")
                if path.name.split("-", 1)[1].isdigit() and _save_finished(path)]
    return str(max(complete, key=checkpoint_step)) if complete else None


def checkpoint_step(checkpoint: str | os.PathLike) -> int:
    """The global step a complete checkpoint was saved at (its folder is named after it)."""
    return int(Path(checkpoint).name.split("-", 1)[1])


TRAIN_LOSS_FILE = "train_loss.json"


def checkpoint_loss_sum(checkpoint: str | os.PathLike) -> float | None:
    """Sum over the run's steps (from its first, across resumes) of the per-step training loss averaged over
    ranks, kept in a checkpoint so that a resumed run's `train_loss` is the mean over all its steps; None for
    a checkpoint written before this was kept."""
    try:
        kept = json.loads((Path(checkpoint) / TRAIN_LOSS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(kept, dict) or kept.get("global_step") != checkpoint_step(checkpoint):
        return None
    loss_sum = kept.get("loss_sum")
    return float(loss_sum) if isinstance(loss_sum, (int, float)) and math.isfinite(loss_sum) else None


def cleanup_after_full_disk(error: BaseException, folder: str | os.PathLike) -> tuple[list[str], str | None] | None:
    """After a failed write into the checkpoint `folder`: None unless the disk filled up; then the partial
    checkpoints are removed and this returns (their names, the checkpoint a rerun resumes from or None)."""
    from .io import disk_filled_up

    if not disk_filled_up(error, folder):
        return None
    return remove_incomplete_checkpoints(folder), last_complete_checkpoint(folder)


# Damaged checkpoints -----------------------------------------------------------------------------------------


def weight_names(path: Path) -> list[str]:
    """The tensor names of a readable, complete safetensors file (reads only its index); ValueError naming `path`
    otherwise."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            keys = list(handle.keys())
            for key in keys:  # the index must point inside the file: a truncated file fails here
                handle.get_slice(key).get_shape()
    except Exception as error:  # SafetensorError, OSError, ...: whatever it is, the file cannot be used
        raise ValueError(f"{path} cannot be read ({type(error).__name__}: {error}); the file is damaged or "
                         "truncated") from None
    if not keys:
        raise ValueError(f"{path} holds no weights")
    return keys


# torch's words around why `torch.load(weights_only=True)` refused a file: advice (to load it with weights_only=False,
# or to file an issue) that a user must not follow for a file from an untrusted source.
_TORCH_UNPICKLING_ADVICE = ("Weights only load failed", "Check the documentation of torch.load", "In PyTorch 2.6")


def unpickling_refusal(path: str | os.PathLike, error: BaseException) -> str:
    """The one line saying that `path` was refused by `torch.load(weights_only=True)`: what torch found in it (the
    global or operand it would not load), without torch's advice to retry with weights_only=False, and the
    project's advice instead."""
    found = []
    for line in str(error).splitlines():
        line = line.strip()
        if "WeightsUnpickler error:" in line:
            line = line.split("WeightsUnpickler error:", 1)[1].strip()
        line = re.split(r"\.? Please ", line)[0]  # "Please use torch.serialization.add_safe_globals(...)"
        if line and not line.startswith(_TORCH_UNPICKLING_ADVICE) and "weights_only" not in line:
            found.append(line.rstrip("."))
    detail = f" ({'; '.join(found)})" if found else ""
    return (f"{os.fspath(path)} cannot be loaded as plain tensors, so it is refused{detail}: it holds more than tensors, "
            "and hf-elmo never runs the code a pickle may carry; get the file as plain tensors (a state dict, or "
            "safetensors) from a source you trust")


def _check_torch_file(path: Path) -> None:
    """ValueError naming `path` unless it is a complete torch file that the Trainer loads as it does (tensors,
    containers and the numpy RNG state it allows): a cut file has no zip index, and anything else would need
    unpickling arbitrary objects."""
    import pickle

    import torch

    from .transformers_versions import safe_globals

    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a complete torch file")
    try:
        with safe_globals():
            torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as error:
        raise ValueError(unpickling_refusal(path, error)) from None
    except (RuntimeError, OSError, EOFError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{path} cannot be loaded as plain tensors, so it is refused ({reason})") from None


def check_checkpoint_readable(checkpoint: str | os.PathLike, advice: str | None = None) -> None:
    """Refuse, before training starts, a checkpoint to resume from whose files are damaged (truncated by a full disk,
    a copy cut short) or hold more than tensors: otherwise the Trainer fails halfway with a raw library error.
    The one-line ValueError names the file, then `advice` (default: what to delete)."""
    folder = Path(checkpoint)
    advice = advice or (f"delete {folder} to resume from an earlier checkpoint, or start over in another "
                        "--output-dir (--no-resume refuses a folder that holds a run)")
    try:
        weight_names(folder / "model.safetensors")
        try:
            state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{folder / 'trainer_state.json'} cannot be read ({error})") from None
        if not isinstance(state, dict):
            raise ValueError(f"{folder / 'trainer_state.json'} is not a JSON object")
        for path in sorted([folder / "optimizer.pt", folder / "scheduler.pt", *folder.glob("rng_state*.pth")]):
            if path.exists():
                _check_torch_file(path)
    except ValueError as error:
        raise ValueError(f"the checkpoint {folder} is damaged: {error}; {advice}") from None


# The run a folder holds ---------------------------------------------------------------------------------------

RUN_IDENTITY_FILE = "run_options.json"


class RunFolderError(ValueError):
    """A run folder that holds another run, is in use by a running one, or whose record cannot be read."""


def read_json_object(path: str | os.PathLike, what: str) -> dict:
    """The JSON object in `path` (a config, a run record); ValueError "cannot read `what` `path`: why" otherwise."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {what} {path}: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"cannot read {what} {path}: it holds a JSON {type(value).__name__}, not an object")
    return value


def read_run_identity(folder: str | os.PathLike) -> dict | None:
    """The identity recorded in `folder`, None when there is none; RunFolderError naming the file if unreadable."""
    path = Path(folder) / RUN_IDENTITY_FILE
    if not path.is_file():
        return None
    try:
        return read_json_object(path, "the run record")
    except ValueError as error:
        raise RunFolderError(f"{error}; delete {folder} to start over") from None


def write_run_identity(folder: str | os.PathLike, identity: dict) -> None:
    from .io import atomic_write_text

    atomic_write_text(Path(folder) / RUN_IDENTITY_FILE, json.dumps(identity, indent=1, ensure_ascii=False) + "\n")


def check_same_run(folder: str | os.PathLike, recorded: dict, identity: dict, spell=lambda name: name,
                   recorded_defaults: dict | None = None) -> None:
    """RunFolderError listing each option with the value the run in `folder` was started with and the value now,
    unless the two identities agree (`recorded_defaults`: options newer than some records, with the value those
    runs had; `spell`: an option's name as the user wrote it)."""
    current = json.loads(json.dumps(identity))  # tuples -> lists, as read back
    recorded = {**(recorded_defaults or {}), **recorded}
    differing = [name for name in current if recorded.get(name) != current[name]]
    differing += [name for name in recorded if name not in current]
    if differing:
        changes = "; ".join(f"{spell(name)} {recorded.get(name)!r} there, {current.get(name)!r} now"
                            for name in differing[:4])
        raise RunFolderError(f"{folder} holds a run started with other options ({changes}): run it again with its "
                             "own options to resume it, or give another --output-dir (or delete that folder)")


def checkpoint_folder_for(output_dir: str | os.PathLike) -> Path:
    """Where fine-tuning keeps the checkpoints of a run writing `output_dir`: beside it, under a name fixed by it, so
    the same command run again after a kill finds them."""
    output = Path(output_dir).resolve()
    return output.parent / f".{output.name}.checkpoints"


def create_run_folder(folder: str | os.PathLike, identity: dict) -> None:
    """Make the run folder `folder` with the record of its run, unless it holds a record or checkpoints already (the
    caller holds the output's lock; a run killed before the record was written left an empty folder)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / RUN_IDENTITY_FILE).exists() and not any(folder.glob("checkpoint-*")):
        write_run_identity(folder, identity)


__all__ = ["RUN_IDENTITY_FILE", "TRAIN_LOSS_FILE", "RunFolderError", "check_checkpoint_readable", "check_same_run",
           "checkpoint_folder_for", "checkpoint_loss_sum", "checkpoint_step", "cleanup_after_full_disk",
           "create_run_folder", "last_complete_checkpoint", "read_json_object", "read_run_identity",
           "remove_incomplete_checkpoints", "weight_names", "write_run_identity"]
