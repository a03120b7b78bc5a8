"""How a pool's mpi ranks start: mpiexec runs one worker per rank, which connects back to the launcher.

Locally mpiexec is the launcher's child (its output kept in a temporary file for a failed start's
report); under a rank host (the autograder's sandbox) the host runs it (host_link.start_mpiexec). Its
environment gets the run meter's MPI settings (observe/run_meter.mpi_env: TCP instead of shared
memory, where a grading measures traffic).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from ..errors import LaunchError
from ..observe.run_meter import mpi_env
from . import host_link


def find_mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.path.exists(here) else shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise LaunchError("backend='mpi' needs mpiexec: pip install mpi4py mpich (or a system MPI)")
    return found


def start(world_size: int, spec: dict, address, authkey_hex: str, host: str | None):
    """(the mpiexec process, its output file or None under a host, the MPI settings its environment got)."""
    settings = mpi_env()
    cmd = [find_mpiexec(), "-n", str(world_size), sys.executable, "-m", "minitorch_dist.runtime.launching.worker",
           address[0], str(address[1]), json.dumps(spec)]
    extra = {"MINITORCH_DIST_AUTHKEY": authkey_hex, **settings}
    if host:
        return host_link.start_mpiexec(host, cmd, extra), None, settings
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=dict(os.environ, **extra), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, log, settings


def output_tail(proc, log) -> str:
    """The last of mpiexec's output: from its file, or from the rank host."""
    if log is None:
        return proc.output_tail()
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]
