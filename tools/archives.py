"""Archives in a folder about to ship (a student copy, a Gradescope upload): found by name or by their
first bytes, and their members read, within limits, so the leak scan (tools.release.find_leaks) can
say what an archive would give away.

    is_archive(path)                  # .zip, .tar.gz, ... by name, or zip/gzip/bzip2/xz/7z/rar/tar bytes
    for name, data in members(path):  # zip and tar members, or a single compressed stream; bytes

No archive ships: the release fails on any, whatever it holds. Reading one is only for the message.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import tarfile
import zipfile
from collections.abc import Iterator

from tools.overlay import ARCHIVES

MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c", b"Rar!")
TAR_MAGIC = (257, b"ustar")           # offset and bytes of a (POSIX or GNU) tar header's magic
MAX_MEMBER = 8 << 20                  # bytes read of one member; a longer one is cut there
MAX_MEMBERS = 2000                    # members read of one archive
STREAMS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def is_archive(path: str) -> bool:
    """An archive by its name (tools.overlay.ARCHIVES) or by its first bytes."""
    if os.path.basename(path).lower().endswith(ARCHIVES):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(TAR_MAGIC[0] + len(TAR_MAGIC[1]))
    except OSError:
        return False
    return head.startswith(MAGIC) or head[TAR_MAGIC[0]:] == TAR_MAGIC[1]


def members(path: str) -> Iterator[tuple[str, bytes]]:
    """(member name, its first MAX_MEMBER bytes) of a zip or tar (compressed or not), or the one stream
    of a .gz/.bz2/.xz file; nothing for a format it cannot read (7z, rar) or a damaged archive."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for info in z.infolist()[:MAX_MEMBERS]:
                    if not info.is_dir():
                        with z.open(info) as f:
                            yield info.filename, f.read(MAX_MEMBER)
        elif tarfile.is_tarfile(path):
            with tarfile.open(path, "r:*") as t:
                for count, info in enumerate(t):
                    if count >= MAX_MEMBERS:
                        break
                    f = t.extractfile(info) if info.isfile() else None
                    if f is not None:
                        yield info.name, f.read(MAX_MEMBER)
        else:
            stem, ext = os.path.splitext(os.path.basename(path))
            opener = STREAMS.get(ext.lower())
            if opener is not None:
                with opener(path, "rb") as f:
                    yield stem, f.read(MAX_MEMBER)
    except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, lzma.LZMAError, RuntimeError):
        return
