"""Checksums saved beside the weights (weights_checksums.json): damaged or truncated files are refused on load."""

from __future__ import annotations

import json
import os
import zlib

import torch

from .file_io import apply_umask


WEIGHT_CHECKSUMS_FILE = "weights_checksums.json"


def _file_checksum(path: str) -> str:
    """CRC-32 of a file's bytes, read in chunks: catches damaged or truncated weight files (not a security
    digest: it guards against faults, and reads a 374 MB file in well under the load time)."""
    checksum = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            checksum = zlib.crc32(chunk, checksum)
    return f"{checksum:08x}"


def write_weight_checksums(folder: str | os.PathLike, all_finite: bool) -> None:
    """Record the size and checksum of every .safetensors file of `folder` in weights_checksums.json, and
    whether every weight saved was finite (a verified folder then needs no NaN scan when loaded)."""
    names = sorted(name for name in os.listdir(folder) if name.endswith(".safetensors"))
    record = {
        name: {"bytes": os.path.getsize(os.path.join(folder, name)), "crc32": _file_checksum(os.path.join(folder, name)),
               "all_finite": all_finite}
        for name in names
    }
    with open(os.path.join(folder, WEIGHT_CHECKSUMS_FILE), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)


def verify_weight_checksums(folder: str | os.PathLike) -> bool:
    """OSError naming the file when a weight file of `folder` differs from the checksum saved with it. Folders
    without weights_checksums.json (older saves, other tools) pass. Returns whether the files were verified and
    were saved with finite weights only."""
    path = os.path.join(folder, WEIGHT_CHECKSUMS_FILE)
    if not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nesting too deep for the parser
        raise OSError(f"{path} cannot be read ({str(error) or type(error).__name__}); save or download the model again") from None
    _check_record(record, path)
    for name, expected in record.items():
        weights = os.path.join(folder, name)
        if not os.path.isfile(weights):
            raise OSError(f"{weights} is missing (listed in {WEIGHT_CHECKSUMS_FILE}); save or download the model again")
        if os.path.getsize(weights) != expected.get("bytes") or _file_checksum(weights) != expected.get("crc32"):
            raise OSError(
                f"{weights} is damaged: it differs from the checksum saved with it ({WEIGHT_CHECKSUMS_FILE}); "
                "save, convert or download the model again (if you rewrote it on purpose, delete that file)"
            )
    return bool(record) and all(entry.get("all_finite") is True for entry in record.values())


def _check_record(record, path: str) -> None:
    """OSError naming `path` unless it maps plain file names (no folders, nothing outside the model folder) to
    {"bytes": int, "crc32": str, ...}: a mistyped file is one line, and a name like ../../etc/hostname is
    never read."""
    if not isinstance(record, dict):
        raise OSError(f"{path} must hold a JSON object (weight file name -> size and checksum), got "
                      f"{type(record).__name__}; save or download the model again")
    for name, entry in record.items():
        if not name or name in (".", "..") or os.path.isabs(name) or "/" in name or "\\" in name:
            raise OSError(f"{path} names {name!r}, which is not a file of the model folder; save or download the "
                          "model again")
        if not (isinstance(entry, dict) and type(entry.get("bytes")) is int and isinstance(entry.get("crc32"), str)):
            raise OSError(f"{path}: the entry of {name} must be an object with \"bytes\" (a whole number) and "
                          f"\"crc32\" (text), got {json.dumps(entry)[:100]}; save or download the model again")


# The two hooks the models call by name when hf-elmo is installed (modeling_elmo.py ships without the package).
def weights_verified(folder) -> bool:
    """Whether `folder` (a local folder) holds weights matching the checksums saved with them, all finite: they then
    need no NaN scan. OSError naming the file when they differ; False where unknown (a Hub name, no checksums)."""
    return os.path.isdir(folder) and verify_weight_checksums(folder)


def after_save(folder, state_dict: dict[str, torch.Tensor]) -> None:
    """What `save_pretrained` adds: the user's umask on every file (safetensors writes model.safetensors 0600
    through mkstemp), then the checksums, recording whether every weight of `state_dict` is finite."""
    apply_umask(folder)
    all_finite = all(bool(torch.isfinite(t).all()) for t in state_dict.values() if t.is_floating_point())
    write_weight_checksums(folder, all_finite)


__all__ = ["WEIGHT_CHECKSUMS_FILE", "after_save", "verify_weight_checksums", "weights_verified",
           "write_weight_checksums"]
