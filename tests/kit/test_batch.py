"""autograder.batch: a Gradescope export and a folder of zips graded in one run (on two quick hidden
tests of homework 3), one results.json per student (each member of a group), the gradebook with the notebook's
points merged,
and a re-run that grades only what changed: the submission, the tests, the kit or a score option
(the resume decision itself is tested with a stand-in session, no grading)."""

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
                "  :score: 0.0\nsubmission_102:\n  :submitters:\n  - :name: Bob B\n    :email: b@x.edu\n"
                "  - :name: Dan D\n    :sid: '1004'\n")                             # a group of two
    return export


def test_discover_reads_each_layout(tmp_path):
    subs = batch.discover(_gradescope_export(str(tmp_path)), "hw3")
    assert [(s.student, s.source) for s in subs] == [("1001", "gradescope"), ("b@x.edu", "gradescope")]
    assert [s.students for s in subs] == [("1001",), ("b@x.edu", "1004")]          # a group: every member
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
    nbcsv.write_text("assignment,student_id,score,max_score\nhw3,1001,12.5,17\nhw1,1001,3,3\n")
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY, "--notebook-grades", str(nbcsv)]) == 0
    alice = json.load(open(os.path.join(out, "1001", "results.json")))
    bob = json.load(open(os.path.join(out, "b@x.edu", "results.json")))
    top = sum(t["max_score"] for t in alice["tests"])
    assert top > 0 and alice["score"] == top and bob["score"] == 0
    assert alice["extra_data"]["batch"]["source"] == "gradescope"
    rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(out, "gradebook.csv")))}
    assert set(rows) == {"1001", "b@x.edu", "1004"} and rows["1004"]["group"] == "b@x.edu"
    assert float(rows["1001"]["code"]) == top and float(rows["1001"]["notebook"]) == 12.5
    assert float(rows["1001"]["total"]) == top + 12.5 and float(rows["b@x.edu"]["total"]) == 0
    assert rows["1001"]["notebook_max"] == "17" and "no notebook grade" in rows["1004"]["problems"]
    assert {k.split(" (")[0] for k in rows["1001"] if k.startswith("task ")} == {"task 3.1", "task 3.2", "task 3.3"}
    capsys.readouterr()
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY]) == 0       # nothing new: nothing graded
    assert "2 of 2 already graded" in capsys.readouterr().err
    _reference_files(os.path.join(export, "submission_102"))                     # Bob uploads: his group again
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY]) == 0
    err = capsys.readouterr().err
    assert "1 of 2 already graded" in err and "[1/1] b@x.edu + 1004" in err
    assert json.load(open(os.path.join(out, "1004", "results.json")))["score"] == top
    assert batch.main(["hw3", export, "--out", out, "--only", ONLY, "--deadline", "9"]) == 0   # an option changed
    err = capsys.readouterr().err
    assert "batch: 2 to grade: --deadline 10.0 -> 9.0" in err and "[2/2]" in err, err


OPTIONS = {"only": None, "suites": None, "device": "cpu", "limit": 60.0, "deadline": 10.0}


class FakeSession:
    """Stands in for autograder.session.GradingSession: records what it was asked, grades in no time."""

    made: list[dict] = []
    graded: list[tuple[str, str | None]] = []

    def __init__(self, homework, **kwargs):
        FakeSession.made.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def grade(self, path, only=None):
        FakeSession.graded.append((os.path.basename(path), only))
        points = 1.0 if only else 5.0                      # a quick pass scores less than the full run
        return {"score": points, "tests": [{"name": "HW3 3.1 x", "score": points, "max_score": points}],
                "extra_data": {"tasks": {"3.1": {"score": points, "max": points}}, "code": {"score": points, "max": points},
                               "bonus": {"tasks": [], "score": 0.0, "max": 0.0}}}


def test_resume_regrades_when_tests_kit_or_score_options_change(tmp_path):
    """The resume key: same submission, tests, kit and options keep a results.json; any change regrades."""
    from autograder import resume
    from tools.overlay import copy_kit
    from tools.stubs import SOLUTIONS, builds_on
    kit = tmp_path / "kit"
    copy_kit(str(kit))
    for rel in builds_on(homework_manifest("hw3")):
        os.makedirs(kit / SOLUTIONS / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(ROOT, SOLUTIONS, rel), kit / SOLUTIONS / rel)
    key = resume.grading_key("hw3", OPTIONS, str(kit))
    assert key == resume.grading_key("hw3", dict(OPTIONS, device="cpu"), str(kit))
    done = {"extra_data": {"batch": {"digest": "d", "key": key}}}
    assert resume.why_regrade(done, "d", key) is None
    assert resume.why_regrade(done, "e", key) == "the submission changed"
    assert resume.why_regrade(None, "d", key) == "not graded yet"
    assert "before the resume key" in resume.why_regrade({"extra_data": {"batch": {"digest": "d"}}}, "d", key)
    for name, flag, value in [("only", "only", "bad_input"), ("limit", "limit", 30.0), ("deadline", "deadline", 5.0),
                              ("suites", "tests", [("autograder/hw3", "visible")])]:
        changed = resume.grading_key("hw3", dict(OPTIONS, **{name: value}), str(kit))
        assert f"--{flag} " in resume.why_regrade(done, "d", changed), name
    hidden = kit / "autograder" / "hw3" / "test_powersgd.py"
    hidden.write_text(hidden.read_text() + "\n# one more check\n")
    assert resume.why_regrade(done, "d", resume.grading_key("hw3", OPTIONS, str(kit))) == \
        "the tests changed; the kit changed"
    harness = kit / "minitorch_dist" / "compression" / "__init__.py"
    key = resume.grading_key("hw3", OPTIONS, str(kit))
    harness.write_text(harness.read_text() + "\n")
    assert resume.why_regrade({"extra_data": {"batch": {"digest": "d", "key": key}}}, "d",
                              resume.grading_key("hw3", OPTIONS, str(kit))) == "the kit changed"


def test_a_quick_only_pass_does_not_poison_the_full_run(tmp_path, monkeypatch):
    """--only, then the full command on the same --out: everyone is graded again (the gradebook holds the
    full points); the same command again skips everyone; --force grades everyone."""
    import autograder.session
    monkeypatch.setattr(autograder.session, "GradingSession", FakeSession)
    FakeSession.graded.clear()
    subs = batch.discover(_gradescope_export(str(tmp_path)), "hw3")
    out, lines = str(tmp_path / "grades"), []

    def run(**kw):
        FakeSession.graded.clear()
        counts = batch.grade_all("hw3", subs, out, log=lines.append, **dict(OPTIONS, **kw))
        return counts, [only for _, only in FakeSession.graded]

    assert run(only=ONLY) == ({"graded": 2, "skipped": 0}, [ONLY, ONLY])
    assert run(only=ONLY) == ({"graded": 0, "skipped": 2}, [])
    lines.clear()
    assert run() == ({"graded": 2, "skipped": 0}, [None, None])
    assert any(f"--only {ONLY!r} -> None" in line for line in lines), lines
    assert FakeSession.made[-1]["limit"] == 60.0 and FakeSession.made[-1]["device"] == "cpu"
    rows = list(csv.DictReader(open(batch.write_gradebook("hw3", out))))
    assert [float(r["code"]) for r in rows] == [5.0, 5.0, 5.0]        # the group of two: a row each
    assert run() == ({"graded": 0, "skipped": 2}, [])
    assert run(force=True) == ({"graded": 2, "skipped": 0}, [None, None])
    assert run(limit=120.0) == ({"graded": 2, "skipped": 0}, [None, None])
