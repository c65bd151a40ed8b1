"""Listing and purging a cache folder: what ``ortcore cache list`` and
``ortcore cache purge`` do (loaded by them, never by a session).

Only what the store writes is touched (see :mod:`ortcore.cache`); symlinks
inside the folder are never followed; everything else is reported.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ep_sdk.kernel import is_provider_folder_name

from ..errors import InvalidArgument
from .files import SafeDir, is_link, oserror
from .layout import (
    DIGEST_FOLDER,
    DIGEST_RE,
    ENTRY_RE,
    META_LIMIT,
    QUERY_RE,
    SESSION_FOLDER,
    SESSION_RE,
    TEMP_GRACE_S,
    TEMP_RE,
)

__all__ = ["CacheAdmin", "CacheListing", "CacheNote", "PurgeReport"]


@dataclass(frozen=True)
class CacheNote:
    """An item of a cache folder that was left alone, and why.

    ``error`` is true when an operation on an item of ours failed (permission
    denied, say); false when the item was skipped on purpose (not ours, a symlink).
    """

    path: str
    reason: str
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"path": self.path, "reason": self.reason, "error": self.error}


@dataclass
class CacheListing:
    """What :meth:`CompiledCache.scan` found: entries' metadata, and what it skipped."""

    directory: Path
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[CacheNote] = field(default_factory=list)


@dataclass
class PurgeReport:
    """What :meth:`CompiledCache.purge` removed, and what it left alone and why."""

    directory: Path
    entries: int = 0
    """How many entries were removed (an entry is a ``.bin`` and its ``.json``)."""
    temp_files: int = 0
    """How many ``.tmp-*`` files left by an interrupted :meth:`CompiledCache.store` went."""
    folders: int = 0
    """How many provider folders were removed (once empty)."""
    sessions: int = 0
    """How many saved sessions were removed (a purge of every provider removes them)."""
    removed: list[str] = field(default_factory=list)
    """Every path removed: entry files, leftover temp files, emptied provider folders."""
    skipped: list[CacheNote] = field(default_factory=list)

    @property
    def errors(self) -> list[CacheNote]:
        """The notes of items of ours that could not be removed."""
        return [n for n in self.skipped if n.error]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "directory": str(self.directory),
            "entries": self.entries,
            "temp_files": self.temp_files,
            "folders": self.folders,
            "sessions": self.sessions,
            "removed": list(self.removed),
            "skipped": [n.to_dict() for n in self.skipped],
        }


@dataclass
class _Entry:
    """The files of one key found in a provider folder."""

    key: str
    files: list[str] = field(default_factory=list)  # "<key>.bin" and/or "<key>.json"
    meta: dict[str, Any] | None = None
    problem: str = ""  # why the entry is not recognised as ours, if it is not


@dataclass
class _FolderScan:
    entries: list[_Entry] = field(default_factory=list)
    temps: list[tuple[str, float]] = field(default_factory=list)  # (name, mtime)
    queries: list[str] = field(default_factory=list)  # a bridge's kept query answers


class CacheAdmin:
    """The administration of a cache folder: :meth:`scan` and :meth:`purge`
    (``CompiledCache.scan`` and ``purge`` hand over to it)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _open_root(self) -> SafeDir | None:
        """The cache folder, or ``None`` when it does not exist (an empty cache)."""
        if not os.path.lexists(self.directory):
            return None
        try:
            return SafeDir.open_root(self.directory)
        except FileNotFoundError:  # a dangling symlink
            return None
        except OSError as exc:
            raise InvalidArgument(
                f"cache folder {self.directory}: cannot open it ({oserror(exc)})"
            ) from exc

    def _folders(
        self, root: SafeDir, provider: str | None, notes: list[CacheNote]
    ) -> Iterator[tuple[str, SafeDir]]:
        """The provider folders to look into (only ``provider``'s when given);
        never the saved sessions' folder."""
        try:
            children = root.scandir()
        except OSError as exc:
            raise InvalidArgument(
                f"cache folder {self.directory}: cannot list it ({oserror(exc)})"
            ) from exc
        for e in children:
            if e.name == SESSION_FOLDER:
                continue
            if provider is not None and e.name != provider:
                continue
            path = str(root.path / e.name)
            if is_link(e):
                notes.append(CacheNote(path, "symlink, not followed"))
            elif not e.is_dir(follow_symlinks=False):
                notes.append(CacheNote(path, "not a cache entry (a file beside the folders)"))
            elif not is_provider_folder_name(e.name):
                notes.append(CacheNote(path, "not a provider folder name"))
            else:
                try:
                    folder = root.child(e.name)
                except OSError as exc:
                    notes.append(CacheNote(path, f"cannot open: {oserror(exc)}", error=True))
                    continue
                with folder:
                    yield e.name, folder

    def _scan_folder(self, folder: SafeDir, provider: str, notes: list[CacheNote]) -> _FolderScan:
        """Sort a provider folder's children into entries, temp files and the rest."""
        out = _FolderScan()
        by_key: dict[str, _Entry] = {}
        try:
            children = folder.scandir()
        except OSError as exc:
            notes.append(CacheNote(str(folder.path), f"cannot list: {oserror(exc)}", error=True))
            return out
        for e in children:
            path = str(folder.path / e.name)
            m = ENTRY_RE.fullmatch(e.name)
            query = QUERY_RE.fullmatch(e.name) is not None
            ours = m is not None or query or TEMP_RE.fullmatch(e.name) is not None
            if is_link(e):
                notes.append(CacheNote(path, "symlink, not followed"))
            elif not ours:
                notes.append(CacheNote(path, "not a cache entry"))
            elif not e.is_file(follow_symlinks=False):
                notes.append(CacheNote(path, "not a regular file"))
            elif query:
                out.queries.append(e.name)
            elif m is None:
                try:
                    out.temps.append((e.name, e.stat(follow_symlinks=False).st_mtime))
                except OSError as exc:
                    notes.append(CacheNote(path, f"cannot stat: {oserror(exc)}", error=True))
            else:
                by_key.setdefault(m.group(1), _Entry(m.group(1))).files.append(e.name)
        for key, entry in sorted(by_key.items()):
            if f"{key}.json" in entry.files:
                entry.meta, entry.problem = self._read_meta(folder, provider, key)
            out.entries.append(entry)
        return out

    @staticmethod
    def _read_meta(folder: SafeDir, provider: str, key: str) -> tuple[dict[str, Any] | None, str]:
        """An entry's metadata, or ``None`` and why it is not ours to trust."""
        try:
            meta = json.loads(folder.read(f"{key}.json", META_LIMIT).decode("utf-8"))
        except OSError as exc:
            return None, f"metadata unreadable: {oserror(exc)}"
        except ValueError as exc:  # also UnicodeDecodeError and json's errors
            return None, f"metadata unreadable: {exc}"
        if not isinstance(meta, dict):
            return None, "metadata is not a JSON object"
        if meta.get("key") != key or meta.get("provider") != provider:
            return None, "metadata names another entry (its key or provider differ)"
        return meta, ""

    def scan(self, provider: str | None = None) -> CacheListing:
        """Every entry's metadata (only ``provider``'s when given), and what was skipped.

        Nothing inside the folder is followed through a symlink; malformed
        metadata, incomplete entries and foreign files are noted, not fatal. A
        folder that does not exist is an empty cache.

        Raises:
            InvalidArgument: the cache folder is a file or cannot be read.
        """
        listing = CacheListing(self.directory)
        root = self._open_root()
        if root is None:
            return listing
        with root:
            for name, folder in self._folders(root, provider, listing.skipped):
                found = self._scan_folder(folder, name, listing.skipped)
                for entry in found.entries:
                    base = folder.path / entry.key
                    if entry.problem:
                        for f in entry.files:
                            listing.skipped.append(CacheNote(str(folder.path / f), entry.problem))
                    elif entry.meta is None:
                        listing.skipped.append(
                            CacheNote(f"{base}.bin", "incomplete entry: no metadata (.json)")
                        )
                    elif f"{entry.key}.bin" not in entry.files:
                        listing.skipped.append(
                            CacheNote(f"{base}.json", "incomplete entry: no data (.bin)")
                        )
                    else:
                        listing.entries.append({**entry.meta, "path": f"{base}.bin"})
        listing.entries.sort(key=lambda m: (str(m.get("provider")), str(m.get("created"))))
        return listing

    def entries(self) -> list[dict[str, Any]]:
        """Metadata of every entry, by provider then creation time (see :meth:`scan`)."""
        return self.scan().entries

    def purge(self, provider: str | None = None) -> PurgeReport:
        """Delete every entry (or only ``provider``'s) and report what was done.

        Only what :meth:`store` writes is removed (see the module docstring):
        entries, leftover temp files older than :data:`TEMP_GRACE_S`, and a
        provider folder once it is empty. Symlinks inside the cache are never
        followed; foreign files stay. A failure on one item (permission denied)
        is noted in the report's ``skipped`` (with ``error`` set) and the purge
        goes on. A folder that does not exist is an empty cache.

        Raises:
            InvalidArgument: the cache folder is a file or cannot be read.
        """
        report = PurgeReport(self.directory)
        root = self._open_root()
        if root is None:
            return report
        now = time.time()
        with root:
            if provider is None:
                self._purge_sessions(root, report)
            for name, folder in self._folders(root, provider, report.skipped):
                found = self._scan_folder(folder, name, report.skipped)
                for entry in found.entries:
                    if entry.problem:
                        for f in entry.files:
                            report.skipped.append(CacheNote(str(folder.path / f), entry.problem))
                        continue
                    # metadata first: without it the entry is a miss at once
                    ok = all(
                        self._remove(folder, f, report)
                        for f in sorted(entry.files, key=lambda f: not f.endswith(".json"))
                    )
                    report.entries += ok
                for query in found.queries:
                    self._remove(folder, query, report)
                for tmp, mtime in found.temps:
                    if now - mtime < TEMP_GRACE_S:
                        report.skipped.append(
                            CacheNote(
                                str(folder.path / tmp),
                                f"temp file younger than {TEMP_GRACE_S:.0f} s "
                                "(a store may be writing it)",
                            )
                        )
                    else:
                        report.temp_files += self._remove(folder, tmp, report)
                self._remove_if_empty(root, folder, name, report)
        return report

    @staticmethod
    def _purge_sessions(root: SafeDir, report: PurgeReport) -> None:
        """Remove the saved sessions (their ``.onnx`` and ``.meta`` files, and
        leftover temp files) and the remembered file digests, then their
        folders once empty."""
        try:
            if not stat.S_ISDIR(root.lstat(SESSION_FOLDER).st_mode):
                return  # absent, or not a real folder (a symlink is not followed)
        except OSError:
            return

        def is_session_file(e: os.DirEntry[str]) -> bool:
            named = SESSION_RE.fullmatch(e.name) is not None
            return (named and e.is_file(follow_symlinks=False)) or bool(TEMP_RE.fullmatch(e.name))

        def is_digest_file(e: os.DirEntry[str]) -> bool:
            named = DIGEST_RE.fullmatch(e.name) or TEMP_RE.fullmatch(e.name)
            return named is not None and e.is_file(follow_symlinks=False)

        def digests(folder: SafeDir, e: os.DirEntry[str]) -> bool:
            if e.name != DIGEST_FOLDER or not e.is_dir(follow_symlinks=False):
                return False
            CacheAdmin._purge_folder(folder, DIGEST_FOLDER, is_digest_file, "digest", report)
            return True

        removed = CacheAdmin._purge_folder(
            root, SESSION_FOLDER, is_session_file, "saved session", report, digests
        )
        report.sessions += len(
            {m.group(1) for m in map(SESSION_RE.fullmatch, removed) if m is not None}
        )

    @staticmethod
    def _purge_folder(
        parent: SafeDir,
        name: str,
        wanted: Callable[[os.DirEntry[str]], bool],
        what: str,
        report: PurgeReport,
        visit: Callable[[SafeDir, os.DirEntry[str]], bool] | None = None,
    ) -> list[str]:
        """Remove the entries of ``parent``'s sub-folder ``name`` that ``wanted``
        accepts (``visit`` may take an entry first; any other is reported as
        "not a ``what``"), then the folder once empty; the names removed."""
        try:
            folder = parent.child(name)
        except OSError:
            return []
        removed: list[str] = []
        with folder:
            try:
                children = folder.scandir()
            except OSError as exc:
                report.skipped.append(
                    CacheNote(str(folder.path), f"cannot list: {oserror(exc)}", error=True)
                )
                return removed
            for e in children:
                if visit is not None and visit(folder, e):
                    continue
                if not wanted(e):
                    report.skipped.append(CacheNote(str(folder.path / e.name), f"not a {what}"))
                    continue
                if CacheAdmin._remove(folder, e.name, report):
                    removed.append(e.name)
            try:
                if not folder.scandir():
                    parent.rmdir(name)
                    report.removed.append(str(folder.path))
            except OSError:
                pass
        return removed

    @staticmethod
    def _remove(folder: SafeDir, name: str, report: PurgeReport) -> bool:
        path = str(folder.path / name)
        try:
            folder.unlink(name)
        except FileNotFoundError:
            return True  # gone already (another purge): nothing left to do
        except OSError as exc:
            report.skipped.append(CacheNote(path, f"cannot remove: {oserror(exc)}", error=True))
            return False
        report.removed.append(path)
        return True

    @staticmethod
    def _remove_if_empty(root: SafeDir, folder: SafeDir, name: str, report: PurgeReport) -> None:
        try:
            if folder.scandir():
                return
            root.rmdir(name)
        except FileNotFoundError:
            return
        except OSError as exc:
            report.skipped.append(
                CacheNote(str(folder.path), f"cannot remove folder: {oserror(exc)}", error=True)
            )
            return
        report.removed.append(str(folder.path))
        report.folders += 1
