"""Read a submission (a folder or a zip) without trusting it: what it holds, and bytes within limits.

    with Intake("submission.zip") as sub:          # or a folder
        for entry in sub.entries: ...             # Entry(name, size, problem)
        data = sub.read(entry, cap)               # bytes, or Refused with the reason

A submission is student data: a zip may claim small sizes and inflate to gigabytes, hold
symbolic links, absolute or `..` paths; a folder may hold links to /etc/passwd, FIFOs that
block a reader forever, or a whole dataset. So:

- at most `MAX_ENTRIES` entries (files, folders, links) are looked at, in a fixed order;
- nothing is followed: folders are walked with lstat, and a file is opened with O_NOFOLLOW
  and O_NONBLOCK and read only if fstat says it is a regular file;
- a zip entry that is a link, a special file, encrypted, or has an absolute or `..` path is
  listed with its `problem` and never extracted (nothing is ever written from a zip but the
  bytes `read` returns);
- `read` returns at most `cap` bytes and raises Refused when there are more, whatever the
  zip's headers declare (callers check declared sizes first, see tools.overlay.apply).

The limits live here, as module constants, and nowhere else.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field

MAX_FILE_BYTES = 1 << 20       # one submitted file
MAX_TOTAL_BYTES = 8 << 20      # all the files read from one submission
MAX_ENTRIES = 200              # entries of a zip or a folder looked at
LISTED_PER_ENTRY = 50          # names read from one folder, per entry looked at (the order is fixed below that)
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ipynb_checkpoints", "minitorch_dist.egg-info",
             "__MACOSX"}


@dataclass(frozen=True)
class Limits:
    """The limits a submission is read under (the module constants unless a test passes others)."""

    file_bytes: int = MAX_FILE_BYTES
    total_bytes: int = MAX_TOTAL_BYTES
    entries: int = MAX_ENTRIES


class Refused(Exception):
    """A file is not taken from the submission; the message ends with what to do."""


@dataclass
class Entry:
    """One file-like entry of a submission (folders are not entries)."""

    name: str                 # path inside the submission, "/"-separated, made safe for matching
    size: int                 # declared uncompressed size (zip) or lstat size (folder)
    problem: str = ""         # why it is never read ("is a symbolic link ..."), "" if it may be
    ref: object = field(default=None, repr=False)    # absolute path (folder) or zipfile.ZipInfo


class OverCap(Refused):
    """More bytes than the cap were found while reading (the caller words the limit)."""

    def __init__(self, entry: Entry):
        super().__init__(entry.name)
        self.entry = entry


def human(n: int) -> str:
    """A byte count as people read it: 3.2 MiB, 1 MiB, 12 KiB, 100 B."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.1f} {unit}"
    return f"{n} B"


_SPECIAL = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
            stat.S_IFSOCK: "a socket"}
LINK = "is a symbolic link, and links are never followed: submit the file itself"


def special(mode: int) -> str:
    """Why a file of this (non-regular) mode is refused, and what to do."""
    return (f"is a special file ({_SPECIAL.get(stat.S_IFMT(mode), 'not a regular file')}), which is never read: "
            f"submit the file itself")


class Intake:
    """The entries of a folder or zip submission, and bounded reads of them (a context manager)."""

    def __init__(self, impl: str, limits: Limits = Limits()):
        self.impl, self.limits = impl, limits
        self.entries: list[Entry] = []
        self.overflow = False           # more entries than limits.entries: the rest were not looked at
        self._seen = 0
        self._zip: zipfile.ZipFile | None = None

    def __enter__(self) -> Intake:
        if os.path.isdir(self.impl):
            self._list_folder()
        elif os.path.isfile(self.impl) and zipfile.is_zipfile(self.impl):
            self._zip = zipfile.ZipFile(self.impl)
            self._list_zip()
        else:
            raise ValueError(f"implementation {self.impl!r} is neither a folder nor a zip file")
        return self

    def __exit__(self, *exc) -> None:
        if self._zip is not None:
            self._zip.close()

    def _look(self) -> bool:
        """Count one entry looked at; False once over the limit."""
        self._seen += 1
        if self._seen > self.limits.entries:
            self.overflow = True
        return not self.overflow

    def _list_zip(self) -> None:
        for info in self._zip.infolist():
            if not self._look():
                return
            raw = info.filename.replace("\\", "/")
            parts = [p for p in raw.split("/") if p not in ("", ".")]
            mode = info.external_attr >> 16
            if info.is_dir() or stat.S_ISDIR(mode) or not parts or SKIP_DIRS & set(parts):
                continue
            problem = ""
            if raw.startswith("/") or re.match(r"[A-Za-z]:", raw) or ".." in parts:
                problem = (f"has an absolute or '..' path in the zip ({info.filename!r}), and such entries are "
                           f"never extracted: zip the files with paths inside the zip")
            elif stat.S_ISLNK(mode):
                problem = LINK.replace("submit the file itself", "zip the file itself, not a link to it")
            elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                problem = special(mode)
            elif info.flag_bits & 0x1:
                problem = "is encrypted in the zip: submit a zip without a password"
            name = "/".join(p for p in parts if p != "..")
            self.entries.append(Entry(name, info.file_size, problem, info))

    def _list_folder(self) -> None:
        stack = [""]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(os.path.join(self.impl, folder)) as it:      # bounded, then sorted: a fixed order
                    names = sorted(e.name for e in itertools.islice(it, LISTED_PER_ENTRY * self.limits.entries))
            except OSError as exc:
                if not folder:
                    raise                       # the submission itself: lay_submission reports it
                self.entries.append(Entry(folder, 0, f"is a folder that could not be read ({exc.strerror})"))
                continue
            subfolders = []
            for n in names:
                if not self._look():
                    return
                rel = posixpath.join(folder, n) if folder else n
                path = os.path.join(self.impl, rel)
                try:
                    st = os.lstat(path)
                except OSError as exc:
                    self.entries.append(Entry(rel, 0, f"could not be looked at ({exc.strerror})", path))
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if n not in SKIP_DIRS:
                        subfolders.append(rel)
                elif stat.S_ISLNK(st.st_mode):
                    self.entries.append(Entry(rel, st.st_size, LINK, path))
                elif not stat.S_ISREG(st.st_mode):
                    self.entries.append(Entry(rel, 0, special(st.st_mode), path))
                else:
                    self.entries.append(Entry(rel, st.st_size, "", path))
            stack.extend(reversed(subfolders))

    def read(self, entry: Entry, cap: int) -> bytes:
        """The bytes of `entry`; Refused if it has a problem, cannot be read, or holds more than `cap`."""
        if entry.problem:
            raise Refused(entry.problem)
        if self._zip is not None:
            try:
                with self._zip.open(entry.ref) as f:
                    data = f.read(cap + 1)      # zipfile stops at the declared size; the CRC catches a lie
            except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError) as exc:
                raise Refused(f"could not be read from the zip ({type(exc).__name__}: {exc}): its sizes or "
                              f"checksum do not match its content; make the zip again with a standard tool") from None
        else:
            flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            try:
                fd = os.open(entry.ref, flags)
            except OSError as exc:
                raise Refused(f"could not be opened ({exc.strerror}); it may be a link: submit the file itself") \
                    from None
            with os.fdopen(fd, "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                if not stat.S_ISREG(mode):
                    raise Refused(special(mode))
                data = f.read(cap + 1)
        if len(data) > cap:
            raise OverCap(entry)
        return data

