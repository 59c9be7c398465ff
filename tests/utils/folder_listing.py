"""What a command left in a folder, for the tests that check it wrote nothing else (and removed nothing)."""

from __future__ import annotations

from pathlib import Path


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())
