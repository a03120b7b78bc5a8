"""Limits on what is read from a submission (tools.intake, tools.overlay.apply, autograder.submission).

Each test lays a submission made in tmp_path over a small fake kit (the hw1 stubs at their
kit paths) with lay_submission or apply directly: no grading, no processes. A refused file
must leave the stub in place, say why in the submission check, and cost only its tasks.
"""

import os
import shutil
import stat
import struct
import zipfile

import pytest

from autograder.submission import compile_error, lay_submission
from tools import intake
from tools.intake import Intake, Limits
from tools.overlay import ROOT, apply, homework_manifest

MANIFEST = homework_manifest("hw1")
EDITABLE = MANIFEST["editable"]
RING = "minitorch_dist/collectives/ring.py"
TREE = "minitorch_dist/collectives/tree.py"


def solution(rel):
    with open(os.path.join(ROOT, "solutions", rel), "rb") as f:
        return f.read()


def stub(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


@pytest.fixture
def kit(tmp_path):
    """A fake kit copy: the hw1 stubs at their kit paths (all lay_submission touches)."""
    dest = tmp_path / "kit"
    for rel in EDITABLE:
        os.makedirs(dest / os.path.dirname(rel), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, rel), dest / rel)
    return str(dest)


def flat_folder(folder, replace=None):
    """The hw1 solutions flat in `folder`; `replace` {base name: bytes} overrides some."""
    os.makedirs(folder, exist_ok=True)
    for rel in EDITABLE:
        name = os.path.basename(rel)
        data = (replace or {}).get(name, solution(rel))
        if data is not None:
            (folder / name).write_bytes(data)
    return str(folder)


def zip_of(path, entries):
    """A zip holding `entries` {name or ZipInfo: bytes}, deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return str(path)


def flat_entries(replace=None):
    out = {os.path.basename(rel): solution(rel) for rel in EDITABLE}
    out.update(replace or {})
    return out


def assert_only_refused(check, kit, rel, *phrases):
    """`rel` is refused with `phrases` in its line and holds the stub; the other files were taken."""
    assert list(check.refused) == [rel], check.report()
    for phrase in phrases:
        assert phrase in check.refused[rel], check.refused[rel]
    with open(os.path.join(kit, rel), "rb") as f:
        assert f.read() == stub(rel)
    assert sorted(check.overlaid) == sorted(set(EDITABLE) - {rel}) and not check.missing
    assert not check.ok
    report = check.report()
    assert f"REFUSED  {rel}" in report and "stub was graded instead" in report, report
    assert set(check.replaced_tasks()) == set(check.tasks_of[rel]) and check.tasks_of[rel]


# -- size per file, size in total, entries looked at ------------------------------------------

def test_a_folder_file_over_the_per_file_limit_is_refused(tmp_path, kit):
    big = solution(RING) + b"#" * (3 << 19)                     # 1.5 MiB of comments
    check = lay_submission(flat_folder(tmp_path / "sub", {"ring.py": big}), kit, MANIFEST)
    assert_only_refused(check, kit, RING, "is 1.5 MiB, over the 1 MiB limit per file: submit only your source files")
    assert "(submitted as ring.py)" in check.refused[RING]


def test_a_zip_entry_declaring_too_much_is_refused_before_anything_is_read(tmp_path, kit, monkeypatch):
    sub = zip_of(tmp_path / "sub.zip", flat_entries({"ring.py": solution(RING) + b" " * (3 << 20)}))
    read = []
    real_read = Intake.read
    monkeypatch.setattr(Intake, "read", lambda self, entry, cap: read.append(entry.name) or real_read(self, entry, cap))
    check = lay_submission(sub, kit, MANIFEST)
    assert_only_refused(check, kit, RING, "over the 1 MiB limit per file")
    assert "ring.py" not in read and len(read) == 3


def _lie_about_size(zip_path, name, size):
    """Rewrite the uncompressed size of `name` in the zip's local and central headers (a zip bomb's lie)."""
    data = bytearray(open(zip_path, "rb").read())
    encoded = name.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = data.find(signature)
        while at >= 0:
            if data[at + name_at:at + name_at + len(encoded)] == encoded:
                data[at + size_at:at + size_at + 4] = struct.pack("<I", size)
            at = data.find(signature, at + 4)
    open(zip_path, "wb").write(bytes(data))


def test_a_zip_bomb_that_lies_about_its_size_is_refused_and_nothing_big_is_written(tmp_path, kit):
    sub = zip_of(tmp_path / "bomb.zip", flat_entries({"ring.py": solution(RING) + b"#" * (64 << 20)}))
    _lie_about_size(sub, "ring.py", 1000)
    with zipfile.ZipFile(sub) as z:
        assert z.getinfo("ring.py").file_size == 1000
    check = lay_submission(sub, kit, MANIFEST)
    assert_only_refused(check, kit, RING, "could not be read from the zip", "make the zip again")


def test_reading_stops_past_the_cap_whatever_was_declared(tmp_path):
    sub = zip_of(tmp_path / "big.zip", {"ring.py": b"#" * (2 << 20)})
    with Intake(sub) as intake_:
        with pytest.raises(intake.OverCap):
            intake_.read(intake_.entries[0], 1 << 20)


def test_a_folder_file_bigger_than_its_lstat_said_is_stopped_while_reading(tmp_path, kit, monkeypatch):
    real_enter = Intake.__enter__

    def shrinking_enter(self):           # the file grew after it was listed: only the read can tell
        out = real_enter(self)
        for entry in out.entries:
            entry.size = 0
        return out
    monkeypatch.setattr(Intake, "__enter__", shrinking_enter)
    big = solution(RING) + b"#" * (2 << 20)
    check = lay_submission(flat_folder(tmp_path / "sub", {"ring.py": big}), kit, MANIFEST)
    assert_only_refused(check, kit, RING, "holds more than 1 MiB although it declared 0 B", "limit per file")


def test_the_total_limit_refuses_the_files_past_it(tmp_path, kit):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(9):
        (folder / f"part{i}.py").write_bytes(b"#" * 1_000_000)
    ov = apply(str(folder), kit)                             # every file: 9 MB declared, 8 MiB allowed
    assert len(ov.overlaid) == 8 and list(ov.refused) == ["part8.py"]
    assert "over the 8 MiB limit in total: submit only your source files" in ov.refused["part8.py"]
    assert not os.path.exists(os.path.join(kit, "part8.py"))
    check = lay_submission(flat_folder(tmp_path / "sub"), kit, MANIFEST, limits=Limits(total_bytes=17_000))
    assert check.refused and all("limit in total" in why for why in check.refused.values()), check.report()
    assert sum(len(solution(rel)) for rel in check.overlaid) <= 17_000


@pytest.mark.parametrize("kind", ["folder", "zip"])
def test_only_the_first_entries_are_looked_at(tmp_path, kit, kind):
    junk = {f"a{i:03d}.txt": b"x" for i in range(intake.MAX_ENTRIES + 50)}      # sorted before the sources
    if kind == "folder":
        sub = flat_folder(tmp_path / "sub")
        for name, data in junk.items():
            (tmp_path / "sub" / name).write_bytes(data)
    else:
        sub = zip_of(tmp_path / "sub.zip", {**junk, **flat_entries()})
    check = lay_submission(sub, kit, MANIFEST)
    assert sorted(check.missing) == sorted(EDITABLE) and not check.overlaid
    assert f"more than {intake.MAX_ENTRIES} files and folders; only the first {intake.MAX_ENTRIES} were looked at" \
        in check.report()
    few = lay_submission(zip_of(tmp_path / "few.zip", {**dict(list(junk.items())[:150]), **flat_entries()}),
                         kit, MANIFEST)
    assert few.ok and not few.notes, few.report()


# -- links, special files, unsafe zip paths --------------------------------------------------

def test_a_symlink_to_etc_passwd_in_a_folder_is_refused_and_not_followed(tmp_path, kit):
    sub = flat_folder(tmp_path / "sub", {"ring.py": None})
    os.symlink("/etc/passwd", os.path.join(sub, "ring.py"))
    os.symlink("/etc/passwd", os.path.join(sub, "notes.txt"))
    os.symlink("/etc", os.path.join(sub, "etc"))                # a linked folder is not walked
    check = lay_submission(sub, kit, MANIFEST)
    assert_only_refused(check, kit, RING, "is a symbolic link, and links are never followed: submit the file itself")
    assert "NOTE     ignored notes.txt, which is a symbolic link" in check.report()
    assert "NOTE     ignored etc, which is a symbolic link" in check.report()


@pytest.mark.timeout(30)
def test_a_fifo_in_a_folder_is_refused_without_blocking(tmp_path, kit):
    sub = flat_folder(tmp_path / "sub", {"tree.py": None})
    os.mkfifo(os.path.join(sub, "tree.py"))
    check = lay_submission(sub, kit, MANIFEST)
    assert_only_refused(check, kit, TREE, "is a special file (a FIFO), which is never read: submit the file itself")


def test_a_symlink_entry_in_a_zip_is_refused(tmp_path, kit):
    link = zipfile.ZipInfo("ring.py")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    entries = flat_entries()
    del entries["ring.py"]
    sub = zip_of(tmp_path / "sub.zip", {**entries, link: b"/etc/passwd"})
    check = lay_submission(sub, kit, MANIFEST)
    assert_only_refused(check, kit, RING, "is a symbolic link", "zip the file itself")


def test_zip_slip_paths_are_never_extracted(tmp_path, kit):
    entries = flat_entries()
    del entries["ring.py"], entries["tree.py"]
    entries["../../ring.py"] = solution(RING)
    entries["/tmp/tree.py"] = solution(TREE)
    sub = zip_of(tmp_path / "slip.zip", entries)
    check = lay_submission(sub, kit, MANIFEST)
    assert sorted(check.refused) == sorted([RING, TREE]), check.report()
    assert all("absolute or '..' path in the zip" in why for why in check.refused.values())
    assert not os.path.exists(tmp_path / "ring.py") and not os.path.exists(tmp_path.parent / "ring.py")
    for rel in (RING, TREE):
        with open(os.path.join(kit, rel), "rb") as f:
            assert f.read() == stub(rel)
    good = lay_submission(zip_of(tmp_path / "good.zip", {**flat_entries(), "../evil.py": b"x"}), kit, MANIFEST)
    assert sorted(good.overlaid) == sorted(EDITABLE) and not good.refused
    assert any("ignored evil.py" in note and "'..'" in note for note in good.notes), good.notes


# -- a syntax error shows the submitted line --------------------------------------------------

def test_a_syntax_error_shows_the_submitted_line_not_the_stubs(tmp_path, kit, monkeypatch):
    monkeypatch.chdir(ROOT)                 # CPython fills exc.text for some errors by reading `rel` from here
    lines = solution(RING).decode().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
    lines.insert(at, "return 'the submitted line'")             # found after parsing: 'return' outside function
    assert stub(RING).decode().splitlines()[at] != lines[at]
    sub = flat_folder(tmp_path / "sub", {"ring.py": ("\n".join(lines) + "\n").encode()})
    error = compile_error(os.path.join(sub, "ring.py"), RING)
    assert error.startswith(f"line {at + 1}: SyntaxError: 'return' outside function"), error
    assert error.rstrip().endswith("return 'the submitted line'"), error
    check = lay_submission(sub, kit, MANIFEST)
    assert f"line {at + 1}: SyntaxError" in check.broken[RING] and "the submitted line" in check.report()
    parse = solution(TREE).decode().replace("def broadcast(", "def broadcast(:", 1).encode()
    line = parse.decode().splitlines().index(next(l for l in parse.decode().splitlines() if "broadcast(:" in l)) + 1
    check = lay_submission(flat_folder(tmp_path / "sub2", {"tree.py": parse}), kit, MANIFEST)
    assert f"line {line}: SyntaxError" in check.broken[TREE] and "def broadcast(:" in check.broken[TREE]
    with open(os.path.join(kit, TREE), "rb") as f:
        assert f.read() == stub(TREE)


def test_the_limits_are_module_constants():
    assert (intake.MAX_FILE_BYTES, intake.MAX_TOTAL_BYTES, intake.MAX_ENTRIES) == (1 << 20, 8 << 20, 200)
    assert Limits() == Limits(intake.MAX_FILE_BYTES, intake.MAX_TOTAL_BYTES, intake.MAX_ENTRIES)
    assert intake.human(int(3.2 * (1 << 20))) == "3.2 MiB" and intake.human(1 << 20) == "1 MiB"
