"""`python -m minitorch_dist.submit HW`, as a student runs it in their copy: the public tests run first
and their summary is printed, unfinished tasks are named, and the zip holds exactly the homework's
editable files, flat, as the grader reads them (tools.overlay accepts it: every file laid)."""

from __future__ import annotations

import os
import sys
import zipfile

import pytest

from tools.overlay import ROOT, apply, copy_kit, homework_manifest
from tools.release import homeworks
from tests.kit.conftest import run_in


@pytest.mark.parametrize("hw", homeworks())
def test_every_homeworks_files_have_distinct_names(hw):
    names = [os.path.basename(rel) for rel in homework_manifest(hw)["editable"]]
    assert len(set(names)) == len(names), names          # flat in the zip


@pytest.mark.slow
def test_submit_runs_the_public_tests_and_zips_the_editable_files(reference, tmp_path):
    out = tmp_path / "hw4.zip"
    code, text = run_in(reference, sys.executable, "-m", "minitorch_dist.submit", "hw4", "--out", str(out), timeout=600)
    assert code == 0, text
    assert "submit: public tests:" in text and " passed" in text and "not written yet" not in text, text
    editable = homework_manifest("hw4")["editable"]
    with zipfile.ZipFile(out) as z:
        assert sorted(z.namelist()) == sorted(os.path.basename(rel) for rel in editable)
        for rel in editable:
            with open(os.path.join(ROOT, "solutions", rel), "rb") as f:
                assert z.read(os.path.basename(rel)) == f.read(), rel
    kit = tmp_path / "kit"
    copy_kit(str(kit))
    assert sorted(apply(str(out), str(kit), editable).overlaid) == sorted(editable)   # what the grader takes


@pytest.mark.slow
def test_submit_on_the_stubs_names_every_unfinished_task(stubs, tmp_path):
    out = tmp_path / "hw1.zip"
    code, text = run_in(stubs, sys.executable, "-m", "minitorch_dist.submit", "hw1", "--skip-tests", "--out", str(out))
    assert code == 0 and out.exists(), text
    for task in ("1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7"):
        assert f"HW1 task {task} (" in text, (task, text)
    code, text = run_in(stubs, sys.executable, "-m", "minitorch_dist.submit", "hw9", "--skip-tests")
    assert code != 0 and "no homework 'hw9'" in text and "hw1" in text, text


def test_submit_writes_its_zip_to_the_kits_dist_folder(stubs):
    """Without --out the zip is a build product: in the kit's dist/ (ignored, never copied), not its root."""
    code, text = run_in(stubs, sys.executable, "-m", "minitorch_dist.submit", "hw2", "--skip-tests")
    assert code == 0, text
    assert zipfile.is_zipfile(os.path.join(stubs.root, "dist", "hw2_submission.zip")), text
    assert not os.path.exists(os.path.join(stubs.root, "hw2_submission.zip"))
