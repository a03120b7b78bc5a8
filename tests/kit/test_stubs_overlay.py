"""tools.stubs (stubs generated from solutions, drift detected) and tools.overlay (run against an
implementation without touching the working tree)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tools import overlay as ov_mod
from tools import stubs
from tools.overlay import ROOT, homework_manifest, overlay

EDITABLE = homework_manifest("hw1")["editable"]
# Runs ring_all_reduce on 3 simulated ranks (collectives off); prints the sums or the error type.
PROBE = """
import torch
from minitorch_dist import launch, RankError
from minitorch_dist.collectives import ring_all_reduce
def main(group):
    return ring_all_reduce(torch.full((7,), float(group.rank)), group).tolist()
try:
    print("RESULT", launch(main, 3, backend="sim", collectives=False)[0])
except RankError as exc:
    print("ERROR", exc.exc_type)
"""


def _digest(paths: list[str]) -> dict[str, str]:
    out = {}
    for rel in paths:
        with open(os.path.join(ROOT, rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def _solution(rel: str) -> str:
    with open(os.path.join(ROOT, stubs.SOLUTIONS, rel)) as f:
        return f.read()


# -- stubs -------------------------------------------------------------------------------------

def test_stubs_have_not_drifted_from_solutions():
    assert stubs.solution_files(), "no solution files found"
    assert stubs.drifted() == []


def test_a_changed_solution_is_detected_as_drift(tmp_path):
    for rel in stubs.solution_files():
        for base in (stubs.SOLUTIONS, "."):
            os.makedirs(tmp_path / base / os.path.dirname(rel), exist_ok=True)
            shutil.copyfile(os.path.join(ROOT, base, rel), tmp_path / base / rel)
    assert stubs.drifted(str(tmp_path)) == []
    target = tmp_path / stubs.SOLUTIONS / "minitorch_dist/collectives/ring.py"
    text = target.read_text()
    target.write_text(text.replace("around a ring", "around a circle", 1))      # outside a region
    assert stubs.drifted(str(tmp_path)) == ["minitorch_dist/collectives/ring.py"]
    os.remove(tmp_path / "minitorch_dist/collectives/tree.py")                   # a missing stub
    assert "minitorch_dist/collectives/tree.py" in stubs.drifted(str(tmp_path))
    stubs.write_stubs(str(tmp_path))
    assert stubs.drifted(str(tmp_path)) == []


def test_stub_text_keeps_the_signature_and_raises_naming_the_task():
    text = stubs.stub_text(_solution("minitorch_dist/collectives/all_reduce.py"))
    assert "def ring_all_reduce(x: torch.Tensor, group, op: str = \"sum\") -> torch.Tensor:" in text
    assert 'raise NotImplementedError("HW1 task 1.7: ring_all_reduce is not implemented yet' in text
    assert "BEGIN SOLUTION" not in text and "reduce_scatter_(buf, group, op)" not in text


@pytest.mark.parametrize("source, message", [
    ("def f():\n    # BEGIN SOLUTION  (HW1 task 1.4)\n    return 1\n", "never closed"),
    ("# BEGIN SOLUTION  (HW1 task 1.4)\nx = 1\n# END SOLUTION\n", "inside function bodies"),
    ("def f():\n    return 1\n    # END SOLUTION\n", "without a BEGIN"),
    ("def f():\n    # BEGIN SOLUTION  (HW1 task 1.4)\n    # BEGIN SOLUTION  (HW1 task 1.5)\n"
     "    # END SOLUTION\n", "inside the region"),
])
def test_bad_markers_raise_marker_error(source, message):
    with pytest.raises(stubs.MarkerError, match=message):
        stubs.stub_text(source, "bad.py")


# -- overlay -----------------------------------------------------------------------------------

def test_overlay_of_solutions_runs_the_real_functions_while_the_tree_keeps_stubs():
    env = dict(os.environ, PYTHONPATH=ROOT)
    here = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert "ERROR NotImplementedError" in here.stdout, here.stdout + here.stderr
    there = subprocess.run([sys.executable, "-m", "tools.overlay", "solutions", "--", sys.executable, "-c", PROBE],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert there.returncode == 0, there.stderr
    assert "RESULT [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]" in there.stdout, there.stdout + there.stderr


def _zip(path, names: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for arcname, rel in names.items():
            z.write(os.path.join(ROOT, stubs.SOLUTIONS, rel), arcname)
    return str(path)


@pytest.mark.parametrize("layout", ["flat", "nested"])
def test_overlay_of_a_submission_zip(tmp_path, layout):
    if layout == "flat":
        names = {os.path.basename(rel): rel for rel in EDITABLE}
    else:
        names = {f"my_hw1/{rel}": rel for rel in EDITABLE}
    names["notes.txt" if layout == "flat" else "my_hw1/notes.txt"] = EDITABLE[0]   # extra files are ignored
    zip_path = _zip(tmp_path / "submission.zip", names)
    with overlay(zip_path, homework="hw1") as ov:
        assert sorted(ov.overlaid) == sorted(EDITABLE) and ov.missing == []
        for rel in EDITABLE:
            with open(os.path.join(ov.root, rel)) as f:
                assert f.read() == _solution(rel)
        assert not os.path.exists(os.path.join(ov.root, "notes.txt"))
        assert not os.path.exists(os.path.join(ov.root, "solutions"))
        root = ov.root
    assert not os.path.exists(root), "the overlay copy must be deleted afterwards"


def test_overlay_reports_files_missing_from_a_submission(tmp_path):
    zip_path = _zip(tmp_path / "partial.zip", {"ring.py": "minitorch_dist/collectives/ring.py"})
    with overlay(zip_path, homework="hw1") as ov:
        assert ov.overlaid == ["minitorch_dist/collectives/ring.py"]
        assert sorted(ov.missing) == sorted(set(EDITABLE) - {"minitorch_dist/collectives/ring.py"})


def test_an_overlay_run_leaves_the_working_tree_untouched():
    watched = EDITABLE + [os.path.join(stubs.SOLUTIONS, rel) for rel in stubs.solution_files()]

    def status():
        return subprocess.run(["git", "status", "--porcelain", "--", *watched], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    before, before_status = _digest(watched), status()
    scribble = "open('minitorch_dist/collectives/ring.py', 'w').write('broken'); open('new_file.txt', 'w')"
    rc = ov_mod.main(["solutions", "--", sys.executable, "-c", scribble])
    assert rc == 0
    assert _digest(watched) == before
    assert status() == before_status
    assert not os.path.exists(os.path.join(ROOT, "new_file.txt"))


@pytest.mark.parametrize("git", [True, False], ids=["git", "walk"])
def test_build_products_never_reach_a_kit_copy(tmp_path, git):
    """dist/, build/ and archives anywhere (a Gradescope upload, a submission zip) are in no copy of the
    kit, whether the kit is a git checkout (the kit's .gitignore) or a plain folder (a walk)."""
    root = tmp_path / "kit"
    kept = {"pkg/m.py": "x = 1\n", "assignments/hw1/README.md": "# hw1\n"}
    products = ["dist/gradescope-hw3.zip", "dist/hw3_submission.zip", "gradescope-hw3.zip", "hw1_submission.zip",
                "build/lib/pkg/m.py", "assignments/hw1/notes.tar.gz", "pkg/data.tgz", "upload.TAR"]
    for rel in [*kept, *products]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(kept.get(rel, "PK\x03\x04 not really a zip"))
    shutil.copy(os.path.join(ROOT, ".gitignore"), root / ".gitignore")
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        ignored = subprocess.run(["git", "check-ignore", "dist/gradescope-hw3.zip", "gradescope-hw3.zip"],
                                 cwd=root, capture_output=True, text=True)
        assert ignored.stdout.split() == ["dist/gradescope-hw3.zip", "gradescope-hw3.zip"], ignored
    want = sorted([".gitignore", *kept])
    assert ov_mod.kit_files(str(root)) == want
    ov_mod.copy_kit(str(tmp_path / "copy"), str(root))
    copied = sorted(os.path.relpath(os.path.join(d, n), tmp_path / "copy")
                    for d, _, names in os.walk(tmp_path / "copy") for n in names)
    assert copied == want
    assert all(ov_mod.build_product(rel) for rel in products) and not any(ov_mod.build_product(r) for r in want)


def test_overlay_of_a_homework_lays_the_reference_it_builds_on(tmp_path):
    """hw3 runs on hw2's BucketedDDP: an overlay of an hw3 submission holds its reference (as the grader
    lays it, tools.stubs.lay_references); without a homework, the stub stays."""
    files = stubs.builds_on(homework_manifest("hw3"))
    assert files, "hw3 no longer builds on an earlier homework: pick one that does"
    with overlay(str(tmp_path), homework="hw3") as ov:                   # an empty submission
        assert ov.provided == files and ov.overlaid == []
        for rel in files:
            with open(os.path.join(ov.root, rel)) as f:
                assert f.read() == stubs.reference_text(_solution(rel)), rel
    with overlay(str(tmp_path)) as ov:
        assert ov.provided == []
        with open(os.path.join(ov.root, files[0])) as f, open(os.path.join(ROOT, files[0])) as stub:
            assert f.read() == stub.read()
