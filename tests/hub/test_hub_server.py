"""The test Hub answers huggingface_hub's own client the way the Hub does (in-process, explicit endpoint)."""

from __future__ import annotations

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

from hub_helpers import TOKEN, hub  # noqa: F401  (pytest fixture)


@pytest.fixture(autouse=True)
def online_for_the_local_hub(monkeypatch):
    # conftest.py puts the suite in Hub offline mode; these tests talk only to the local test Hub.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


def test_commits_keep_their_own_snapshots(api, hub, tmp_path):
    url = api.create_repo("org/server-check")
    assert url.repo_id == "org/server-check"
    assert api.create_repo("org/server-check", exist_ok=True).repo_id == "org/server-check"
    first = api.create_commit(
        "org/server-check",
        [CommitOperationAdd("a.txt", b"one"), CommitOperationAdd("dir/b.txt", b"bee")],
        commit_message="first",
    )
    second = api.create_commit(
        "org/server-check",
        [CommitOperationAdd("a.txt", b"two"), CommitOperationDelete("dir/b.txt")],
        commit_message="second",
    )
    info = api.model_info("org/server-check")
    assert info.sha == second.oid
    assert sorted(s.rfilename for s in info.siblings) == [".gitattributes", "a.txt"]
    assert api.model_info("org/server-check", revision=first.oid).sha == first.oid
    tree = {entry.path for entry in api.list_repo_tree("org/server-check", revision=first.oid, recursive=True)}
    assert tree == {".gitattributes", "a.txt", "dir", "dir/b.txt"}
    assert {e.path for e in api.list_repo_tree("org/server-check", path_in_repo="dir", revision=first.oid)} == {"dir/b.txt"}

    cache = tmp_path / "cache"
    old = hf_hub_download("org/server-check", "a.txt", revision=first.oid, cache_dir=cache, endpoint=hub.url, token=TOKEN)
    new = hf_hub_download("org/server-check", "a.txt", cache_dir=cache, endpoint=hub.url, token=TOKEN)
    assert (open(old, "rb").read(), open(new, "rb").read()) == (b"one", b"two")
    assert f"snapshots/{first.oid}/" in old and f"snapshots/{second.oid}/" in new


def test_missing_repo_revision_and_file_have_the_hub_error_codes(api, hub, tmp_path):
    api.create_repo("org/server-errors")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/nothing-here")
    with pytest.raises(RevisionNotFoundError):
        api.model_info("org/server-errors", revision="f" * 40)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("org/server-errors", "missing.json", cache_dir=tmp_path, endpoint=hub.url, token=TOKEN)
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree("org/server-errors", path_in_repo="no-folder"))


def test_writes_need_a_token(hub):
    with pytest.raises(Exception, match="401"):
        HfApi(endpoint=hub.url, token=False).create_repo("org/anonymous")
    assert "org/anonymous" not in hub.state.repos
