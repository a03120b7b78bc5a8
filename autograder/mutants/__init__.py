"""The mutation suite: seeded bugs kept as patches against solutions/, graded by the real grader.

    python -m autograder.mutants hw1          # table: bug, task, points lost, tests that caught it, message

autograder/mutants/<homework>/<bug>.patch holds one bug (patches.py says the format); grading.py grades
them and weighs what each loses; tests/kit/test_mutants.py checks in CI that every bug is caught.
"""
