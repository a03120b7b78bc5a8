"""run_nbgrader's reading of a command's log: ipykernel's own shutdown race is not the command's error,
anything else logged as ERROR is (tests/kit/nbgrader_exchange.py, KERNEL_SHUTDOWN_RACE)."""

import pytest

pytest.importorskip("nbgrader")

from tests.kit.nbgrader_exchange import KERNEL_SHUTDOWN_RACE  # noqa: E402

RACE = """[AutogradeApp | INFO] Converting notebook hw1_collectives.ipynb
ERROR:tornado.general:Uncaught exception in ZMQStream callback
Traceback (most recent call last):
  File "/v/site-packages/zmq/eventloop/zmqstream.py", line 585, in _log_error
    f.result()
  File "/v/site-packages/ipykernel/kernelbase.py", line 408, in process_control
    sys.stderr.flush()
  File "/v/site-packages/ipykernel/iostream.py", line 343, in schedule
    self._event_pipe.send(b"")
  File "zmq/backend/cython/_zmq.py", line 190, in zmq.backend.cython._zmq._check_rc
zmq.error.ZMQError: Socket operation on non-socket
[AutogradeApp | INFO] Writing 65249 bytes to hw1_collectives.ipynb
"""


def test_the_kernels_shutdown_race_is_left_out_and_nothing_else():
    assert "ERROR" not in KERNEL_SHUTDOWN_RACE.sub("", RACE)
    assert "Writing 65249 bytes" in KERNEL_SHUTDOWN_RACE.sub("", RACE)
    for other in (RACE.replace("process_control", "process_shell"),           # another kernel path
                  RACE.replace("Socket operation on non-socket", "Resource temporarily unavailable"),
                  RACE + "[AutogradeApp | ERROR] There was an error processing hw1_collectives.ipynb\n"):
        assert "ERROR" in KERNEL_SHUTDOWN_RACE.sub("", other)
