"""autograder.batch: a Gradescope export and a folder of zips graded in one run (on two quick hidden
tests of homework 3), one results.json per student, the gradebook with the notebook's points merged,
and a re-run that grades only what changed."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from autograder import batch
from tools.overlay import ROOT, homework_manifest

ONLY = r"bad_input_raises|bad_k_raises"       # hw3: the quick bad-input tests of 3.1, 3.2 and 3.3
EDITABLE = homework_manifest("hw3")["editable"]


def _reference_files(folder) -> None:
    os.makedirs(folder, exist_ok=True)
    for rel in EDITABLE:
        shutil.copy(os.path.join(ROOT, "solutions", rel), os.path.join(folder, os.path.basename(rel)))


def _gradescope_export(root) -> str:
    export = os.path.join(root, "export")
    _reference_files(os.path.join(export, "submission_101"))
    os.makedirs(os.path.join(export, "submission_102"))                      # nothing handed in
    with open(os.path.join(export, "submission_metadata.yml"), "w") as f:
        f.write("submission_101:\n  :submitters:\n  - :name: Alice A\n    :sid: '1001'\n    :email: a@x.edu\n"
                "  :score: 0.0\nsubmission_102:\n  :submitters:\n  - :name: Bob B\n    :email: b@x.edu\n")
    return export


def test_discover_reads_each_layout(tmp_path):
    subs = batch.discover(_gradescope_export(str(tmp_path)), "hw3")
    assert [(s.student, s.source) for s in subs] == [("1001", "gradescope"), ("b@x.edu", "gradescope")]
    nb = tmp_path / "course" / "submitted"
    for student in ("erin", "finn"):
        _reference_files(str(nb / student / "hw3"))
    assert [s.student for s in batch.discover(str(tmp_path / "course"), "hw3")] == ["erin", "finn"]
    zips = tmp_path / "zips"
    zips.mkdir()
    (zips / "carol.zip").write_bytes(b"not a zip")
    assert [(s.student, s.source) for s in batch.discover(str(zips), "hw3")] == [("carol", "folder")]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_batch_grades_writes_a_gradebook_and_resumes(tmp_path, capsys):
    export, out = _gradescope_export(str(tmp_path)), str(tmp_path / "grades")
    nbcsv = tmp_path / "notebook.csv"
    nbcsv.write_text("assignment,student_id,score,max_score\nhw3,1001,12.5,14\nhw1,1001,3,3\n")
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY, "--notebook-grades", str(nbcsv)]) == 0
    alice = json.load(open(os.path.join(out, "1001", "results.json")))
    bob = json.load(open(os.path.join(out, "b@x.edu", "results.json")))
    top = sum(t["max_score"] for t in alice["tests"])
    assert top > 0 and alice["score"] == top and bob["score"] == 0
    assert alice["extra_data"]["batch"]["source"] == "gradescope"
    rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(out, "gradebook.csv")))}
    assert set(rows) == {"1001", "b@x.edu"}
    assert float(rows["1001"]["code"]) == top and float(rows["1001"]["notebook"]) == 12.5
    assert float(rows["1001"]["total"]) == top + 12.5 and float(rows["b@x.edu"]["total"]) == 0
    assert {k for k in rows["1001"] if k.startswith("task ")} == {"task 3.1", "task 3.2", "task 3.3"}
    capsys.readouterr()
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY]) == 0       # nothing new: nothing graded
    assert "2 of 2 already graded" in capsys.readouterr().err
    _reference_files(os.path.join(export, "submission_102"))                     # Bob uploads: only Bob again
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY]) == 0
    err = capsys.readouterr().err
    assert "1 of 2 already graded" in err and "[1/1] b@x.edu" in err
    assert json.load(open(os.path.join(out, "b@x.edu", "results.json")))["score"] == top
