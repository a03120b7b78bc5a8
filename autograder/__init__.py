"""Grade a homework submission: overlay it on the pristine kit, run the graded tests, write results.json.

    python -m autograder.grade hw1 submission.zip --out results.json

Hidden tests live in autograder/<homework>/; the grader itself is the modules of this package.
"""
