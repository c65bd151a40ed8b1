"""``CompiledCache.purge``/``scan`` and ``ortcore cache``: only the cache's own files.

The cache folder may hold symlinks pointing outside it, foreign files and
malformed entries; purge must remove only what ``store`` wrote and report the
rest. Every test runs twice: walking folders through ``dir_fd`` (POSIX) and by
paths (the fallback elsewhere).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ep_sdk import Capability, ExecutionProvider, FusedGroup
from ortcore import cache as cache_mod
from ortcore.cache import CompiledCache
from ortcore.cache import files as cache_files
from ortcore.cli import main
from ortcore.errors import InvalidArgument

A = "AlphaExecutionProvider"
B = "BetaExecutionProvider"


class _Provider(ExecutionProvider):
    version = "1.0"

    def get_capability(self, graph: Any) -> Capability:
        return Capability(claims=[])


class Alpha(_Provider):
    name = A


class Beta(_Provider):
    name = B


class BadName(_Provider):
    name = "../escaped"


def _group(model: bytes) -> FusedGroup:
    return FusedGroup(name="g", nodes=(), inputs=(), outputs=(), model=model, opsets={})


def _store(cache: CompiledCache, cls: type[_Provider], model: bytes) -> tuple[Path, Path]:
    """Store one entry; its ``.bin`` and ``.json`` paths."""
    provider, group = cls(), _group(model)
    cache.store(provider, group, b"compiled:" + model)
    key = cache.key(provider, group)
    folder = cache.directory / cls.name
    return folder / f"{key}.bin", folder / f"{key}.json"


def _fake_entry(folder: Path, key: str, provider: str) -> tuple[Path, Path]:
    """Files that look exactly like an entry (used outside the cache, as victims)."""
    folder.mkdir(parents=True, exist_ok=True)
    data, meta = folder / f"{key}.bin", folder / f"{key}.json"
    data.write_bytes(b"victim")
    meta.write_text(json.dumps({"provider": provider, "key": key, "size": 6}))
    return data, meta


def _reasons(notes: list[Any]) -> dict[str, str]:
    return {Path(n.path).name: n.reason for n in notes}


KEY = "ab" * 32


@pytest.fixture(params=["dir_fd", "paths"], autouse=True)
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test with both ways of walking the cache folder."""
    if request.param == "dir_fd" and not cache_files._USE_DIR_FD:
        pytest.skip("this platform has no dir_fd support")
    monkeypatch.setattr(cache_files, "_USE_DIR_FD", request.param == "dir_fd")
    return str(request.param)


@pytest.fixture
def cache(tmp_path: Path) -> CompiledCache:
    return CompiledCache(tmp_path / "cache")


# -- the library -----------------------------------------------------------------------


def test_round_trip_removes_exactly_the_entries(cache: CompiledCache) -> None:
    files = [
        *_store(cache, Alpha, b"m1"),
        *_store(cache, Alpha, b"m2"),
        *_store(cache, Beta, b"m1"),
    ]
    assert len(cache.entries()) == 3
    report = cache.purge()
    assert (report.entries, report.folders, report.temp_files) == (3, 2, 0)
    assert report.skipped == [] and report.errors == []
    assert sorted(report.removed) == sorted(
        [*map(str, files), str(cache.directory / A), str(cache.directory / B)]
    )
    assert cache.directory.is_dir() and not any(cache.directory.iterdir())
    assert cache.entries() == []


def test_provider_filter(cache: CompiledCache) -> None:
    _store(cache, Alpha, b"m1")
    beta = _store(cache, Beta, b"m1")
    (cache.directory / "README.txt").write_text("mine")
    report = cache.purge(A)
    assert (report.entries, report.folders) == (1, 1)
    assert report.skipped == []  # other providers' folders and root files are not looked at
    assert all(p.exists() for p in beta) and (cache.directory / "README.txt").exists()
    assert [e["provider"] for e in cache.scan(B).entries] == [B]
    assert cache.scan(A).entries == []
    # a filter is compared with folder names, never joined to a path
    assert cache.purge("../cache").entries == 0 and cache.purge(".").entries == 0
    assert all(p.exists() for p in beta)


def test_symlinked_provider_folder_is_not_followed(cache: CompiledCache, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    victims = [*_fake_entry(outside, KEY, "EvilExecutionProvider"), outside / "victim.txt"]
    victims[-1].write_text("precious")
    kept = _store(cache, Alpha, b"m1")
    (cache.directory / "EvilExecutionProvider").symlink_to(outside, target_is_directory=True)
    (cache.directory / "link_to_file").symlink_to(victims[-1])

    listing = cache.scan()
    assert [e["provider"] for e in listing.entries] == [A]
    assert _reasons(listing.skipped) == {
        "EvilExecutionProvider": "symlink, not followed",
        "link_to_file": "symlink, not followed",
    }
    report = cache.purge()
    assert report.entries == 1 and not any(p.exists() for p in kept)
    assert all(v.exists() for v in victims) and victims[-1].read_text() == "precious"
    assert (cache.directory / "EvilExecutionProvider").is_symlink()
    assert _reasons(report.skipped) == _reasons(listing.skipped)
    assert report.errors == []
    # the filter naming the symlink does not follow it either
    report = cache.purge("EvilExecutionProvider")
    assert report.entries == 0 and all(v.exists() for v in victims)
    assert _reasons(report.skipped) == {"EvilExecutionProvider": "symlink, not followed"}


def test_symlinked_entry_files_are_not_followed(cache: CompiledCache, tmp_path: Path) -> None:
    data, meta = _store(cache, Alpha, b"m1")
    victim_bin, victim_json = _fake_entry(tmp_path / "outside", KEY, A)
    folder = data.parent
    # a .bin that is a symlink, beside a real metadata file
    data.unlink()
    data.symlink_to(victim_bin)
    # a whole entry made of symlinks
    (folder / f"{KEY}.bin").symlink_to(victim_bin)
    (folder / f"{KEY}.json").symlink_to(victim_json)

    listing = cache.scan()
    assert listing.entries == []
    reasons = _reasons(listing.skipped)
    assert reasons[data.name] == reasons[f"{KEY}.json"] == "symlink, not followed"
    assert reasons[meta.name] == "incomplete entry: no data (.bin)"

    report = cache.purge()
    assert report.removed == [str(meta)]  # the real metadata file is ours
    assert victim_bin.read_bytes() == b"victim" and victim_json.exists()
    assert data.is_symlink() and (folder / f"{KEY}.json").is_symlink()
    assert folder.is_dir() and report.folders == 0  # not empty: it stays


def test_foreign_files_survive(cache: CompiledCache) -> None:
    entry = _store(cache, Alpha, b"m1")
    folder = entry[0].parent
    root_foreign = [cache.directory / "README.txt", cache.directory / ".hidden" / "x"]
    folder_foreign = [
        folder / "notes.txt",
        folder / f"{KEY}.bin.bak",
        folder / f"{KEY.upper()}.bin",
        folder / ".tmp-short",
        folder / "sub" / "deep.bin",
    ]
    for p in [*root_foreign, *folder_foreign]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("foreign")
    (folder / f"{'cd' * 32}.bin").mkdir()  # an entry name, but a folder
    (cache.directory / "bad name").mkdir()

    report = cache.purge()
    assert report.entries == 1 and not any(p.exists() for p in entry)
    assert all(p.read_text() == "foreign" for p in [*root_foreign, *folder_foreign])
    assert folder.is_dir() and (cache.directory / "bad name").is_dir()
    reasons = _reasons(report.skipped)
    assert reasons == {
        "README.txt": "not a cache entry (a file beside the folders)",
        ".hidden": "not a provider folder name",
        "bad name": "not a provider folder name",
        "notes.txt": "not a cache entry",
        f"{KEY}.bin.bak": "not a cache entry",
        f"{KEY.upper()}.bin": "not a cache entry",
        ".tmp-short": "not a cache entry",
        "sub": "not a cache entry",
        f"{'cd' * 32}.bin": "not a regular file",
    }
    assert report.errors == []


def test_a_provider_folder_of_only_foreign_files_stays(cache: CompiledCache) -> None:
    foreign = cache.directory / "OtherExecutionProvider" / "mine.txt"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("keep")
    report = cache.purge()
    assert report.entries == report.folders == 0 and foreign.read_text() == "keep"


def test_malformed_metadata_is_noted_not_fatal(cache: CompiledCache) -> None:
    good = _store(cache, Alpha, b"m1")
    folder = good[0].parent
    bad = {
        "1" * 64: "{not json",
        "2" * 64: "[1, 2]",
        "3" * 64: json.dumps({"provider": A, "key": "4" * 64}),  # names another entry
        "5" * 64: json.dumps({"provider": B, "key": "5" * 64}),  # another provider's
        "6" * 64: '"\udcff"',
    }
    for key, text in bad.items():
        (folder / f"{key}.bin").write_bytes(b"x")
        (folder / f"{key}.json").write_bytes(text.encode("utf-8", "surrogateescape"))

    listing = cache.scan()
    assert [e["path"] for e in listing.entries] == [str(good[0])]
    reasons = _reasons(listing.skipped)
    assert len(reasons) == 2 * len(bad)
    assert reasons[f"{'1' * 64}.json"].startswith("metadata unreadable")
    assert reasons[f"{'2' * 64}.bin"] == "metadata is not a JSON object"
    assert reasons[f"{'3' * 64}.json"].startswith("metadata names another entry")
    assert reasons[f"{'5' * 64}.json"].startswith("metadata names another entry")
    assert reasons[f"{'6' * 64}.json"].startswith("metadata unreadable")

    report = cache.purge()
    assert report.entries == 1 and not any(p.exists() for p in good)
    assert all((folder / f"{k}.{s}").exists() for k in bad for s in ("bin", "json"))
    assert _reasons(report.skipped) == reasons


def test_incomplete_entries_are_ours(cache: CompiledCache) -> None:
    data_only, meta = _store(cache, Alpha, b"m1")
    meta.unlink()  # store() crashed between its two writes
    meta_only = _store(cache, Alpha, b"m2")[1]
    meta_only.with_suffix(".bin").unlink()
    listing = cache.scan()
    assert listing.entries == []
    assert _reasons(listing.skipped) == {
        data_only.name: "incomplete entry: no metadata (.json)",
        meta_only.name: "incomplete entry: no data (.bin)",
    }
    report = cache.purge()
    assert report.entries == 2 and report.folders == 1 and report.skipped == []


def test_leftover_temp_files(cache: CompiledCache) -> None:
    entry = _store(cache, Alpha, b"m1")
    old, fresh = entry[0].parent / ".tmp-abc_1234", entry[0].parent / ".tmp-xyz_9876"
    old.write_bytes(b"half")
    fresh.write_bytes(b"half")
    stale = time.time() - cache_mod.TEMP_GRACE_S - 10
    os.utime(old, (stale, stale))
    report = cache.purge()
    assert (report.entries, report.temp_files, report.folders) == (1, 1, 0)
    assert not old.exists() and fresh.exists()
    assert _reasons(report.skipped)[fresh.name].startswith("temp file younger than")


def test_permission_denied_is_reported_per_item(
    cache: CompiledCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = _store(cache, Alpha, b"m1")
    other = _store(cache, Alpha, b"m2")
    real_unlink = os.unlink

    def unlink(path: Any, *, dir_fd: int | None = None) -> None:
        if Path(path).name == locked[0].name:
            raise PermissionError(13, "Permission denied")
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    report = cache.purge()
    assert report.entries == 1 and not any(p.exists() for p in other)
    assert locked[0].exists() and not locked[1].exists()  # metadata goes first
    (error,) = report.errors
    assert error.path == str(locked[0]) and "Permission denied" in error.reason
    assert locked[0].parent.is_dir() and report.folders == 0


def test_symlink_swapped_in_for_a_folder_is_refused(cache: CompiledCache, tmp_path: Path) -> None:
    # What _folders does after seeing a real folder: opening it must not follow
    # a symlink put there in between.
    (tmp_path / "outside").mkdir()
    cache.directory.mkdir()
    (cache.directory / A).symlink_to(tmp_path / "outside", target_is_directory=True)
    with cache_files.SafeDir.open_root(cache.directory) as root, pytest.raises(OSError):
        root.child(A)


def test_missing_or_file_cache_dir(tmp_path: Path) -> None:
    assert CompiledCache(tmp_path / "nope").purge().entries == 0
    assert CompiledCache(tmp_path / "nope").entries() == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgument, match="cannot open"):
        CompiledCache(tmp_path / "file").purge()


def test_store_refuses_a_provider_name_that_is_no_folder_name(cache: CompiledCache) -> None:
    group = _group(b"m1")
    cache.store(BadName(), group, b"data")
    assert not cache.directory.exists() and cache.load(BadName(), group) is None


def test_load_misses_on_metadata_that_is_not_an_object(cache: CompiledCache) -> None:
    meta = _store(cache, Alpha, b"m1")[1]
    meta.write_text("[]")
    assert cache.load(Alpha(), _group(b"m1")) is None


# -- the CLI ---------------------------------------------------------------------------


def test_cli_purge_prints_a_summary_and_each_skipped_item(
    cache: CompiledCache, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(cache, Alpha, b"m1")
    _store(cache, Beta, b"m1")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (cache.directory / A / "evil.bin").symlink_to(victim)
    (cache.directory / "README").write_text("mine")

    assert main(["cache", "purge", "--dir", str(cache.directory)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0] == f"removed 2 cached compiled group(s) from {cache.directory}"
    assert lines[1] == "also removed 0 leftover temp file(s) and 1 emptied provider folder(s)"
    assert set(lines[2:]) == {
        f"skipped {cache.directory / 'README'}: not a cache entry (a file beside the folders)",
        f"skipped {cache.directory / A / 'evil.bin'}: symlink, not followed",
    }
    assert len(lines) == 4
    assert out.err == "" and victim.read_text() == "precious"


def test_cli_purge_json_and_exit_code_on_errors(
    cache: CompiledCache, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = _store(cache, Alpha, b"m1")
    real_unlink = os.unlink

    def unlink(path: Any, *, dir_fd: int | None = None) -> None:
        if Path(path).suffix == ".bin":
            raise PermissionError(13, "Permission denied")
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    assert main(["cache", "purge", "--dir", str(cache.directory), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 0 and report["directory"] == str(cache.directory)
    assert report["skipped"] == [
        {"path": str(data), "reason": "cannot remove: Permission denied", "error": True}
    ]
    assert main(["cache", "purge", "--dir", str(cache.directory)]) == 1
    out = capsys.readouterr()
    assert out.err == f"error {data}: cannot remove: Permission denied\n"


def test_cli_provider_filter(cache: CompiledCache, capsys: pytest.CaptureFixture[str]) -> None:
    _store(cache, Alpha, b"m1")
    beta = _store(cache, Beta, b"m1")
    assert main(["cache", "purge", "--dir", str(cache.directory), "--provider", A]) == 0
    assert capsys.readouterr().out.startswith(f"removed 1 cached compiled group(s) of {A} ")
    assert all(p.exists() for p in beta)
    assert main(["cache", "list", "--dir", str(cache.directory), "--provider", A]) == 0
    assert "no cached compiled groups" in capsys.readouterr().out


def test_cli_list_notes_malformed_entries(
    cache: CompiledCache, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(cache, Alpha, b"m1")
    broken = cache.directory / A / f"{KEY}.json"
    broken.write_text("{")
    (cache.directory / A / f"{KEY}.bin").write_bytes(b"x")
    assert main(["cache", "list", "--dir", str(cache.directory)]) == 0
    out = capsys.readouterr().out
    assert out.count(A) >= 1 and f"skipped {broken}: metadata unreadable" in out
    assert main(["cache", "list", "--dir", str(cache.directory), "--json"]) == 0
    captured = capsys.readouterr()
    assert [e["provider"] for e in json.loads(captured.out)] == [A]
    assert f"skipped {broken}: metadata unreadable" in captured.err


@pytest.mark.parametrize("action", ["list", "purge"])
def test_cli_bad_dir_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    missing = tmp_path / "missing"
    assert main(["cache", action, "--dir", str(missing)]) == 2
    assert capsys.readouterr().err == f"ortcore cache: --dir {missing} does not exist\n"
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["cache", action, "--dir", str(afile)]) == 2
    assert capsys.readouterr().err == f"ortcore cache: --dir {afile} is not a folder\n"
    assert afile.read_text() == "x"


def test_cli_dir_given_as_a_symlink_is_used(
    cache: CompiledCache, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _store(cache, Alpha, b"m1")
    link = tmp_path / "link"
    link.symlink_to(cache.directory, target_is_directory=True)
    assert main(["cache", "purge", "--dir", str(link)]) == 0
    assert "removed 1 cached compiled group(s)" in capsys.readouterr().out
    assert not any(p.exists() for p in entry) and link.is_symlink()


def test_cli_odd_file_names_cannot_forge_report_lines(
    cache: CompiledCache, capsys: pytest.CaptureFixture[str]
) -> None:
    cache.directory.mkdir()
    (cache.directory / "x\nremoved 99 cached compiled group(s)").write_text("foreign")
    assert main(["cache", "purge", "--dir", str(cache.directory)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("removed 0 ") and "\\n" in lines[1]
