"""Call the student's code on one rank process, never in the grading process.

    alpha, beta = on_one_rank(rank_fit_alpha_beta, (sizes, seconds), "fit_alpha_beta(sizes, seconds)")
    raises_on_one_rank(rank_fake_ping_pong, (0, 1, (2e-6, 1e-10), [8], {}), "ping_pong(...)", ValueError)

The rank function (rank code, importable from the kit root) calls the student's function and
returns plain data; a stub's NotImplementedError fails the test with its one-line message, any
other error with the call, the exception and the student's frames.
"""

from __future__ import annotations

import re

from assignments.common.rank_runs import fail, try_launch


def on_one_rank(rank_fn, args, what: str):
    """What rank_fn(group, *args) returned on one rank process (gloo): student code runs there only.

    A stub's NotImplementedError fails the test with its one-line message; any other error fails it
    naming `what`, the exception and the rank's traceback.

    Args:
        rank_fn: rank code that calls the student's function and returns plain data
            (e.g. assignments.hw1.tests.hw1_ranks.rank_fit_alpha_beta).
        args: rank_fn's arguments after the group.
        what: the student's call, for messages ("fit_alpha_beta(sizes, seconds)").
    """
    result, err = try_launch(rank_fn, 1, args, collectives=False)
    if err is not None:
        fail(err.message if err.exc_type == "NotImplementedError" else _raised(what, err))
    return result[0]


def raises_on_one_rank(rank_fn, args, what: str, expected: type[Exception] = ValueError) -> None:
    """Fail the test unless rank_fn(group, *args) raises `expected` on one rank process.

    A stub fails it with its one-line message; arguments as on_one_rank.
    """
    result, err = try_launch(rank_fn, 1, args, collectives=False)
    if err is None:
        fail(f"{what} did not raise {expected.__name__} (the rank reported {result[0]!r})")
    if err.exc_type == "NotImplementedError":
        fail(err.message)
    if not (isinstance(err.cause, expected) or err.exc_type == expected.__name__):
        fail(f"{_raised(what, err)}\nexpected {expected.__name__}")


def _raised(what: str, err) -> str:
    """"what raised Type: message" and the rank's traceback without the harness's rank code."""
    frames = re.split(r"(?m)^(?=  File )", err.remote_traceback)
    shown = "".join(f for f in frames if not re.match(r'  File "[^"]*_ranks\.py"', f))
    return f"{what} raised {err.exc_type}: {err.message}\n{shown}".rstrip()
