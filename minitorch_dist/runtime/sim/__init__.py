"""The simulator: every rank a thread of one process, a virtual clock, an alpha-beta network.

    from minitorch_dist.runtime.sim import SimNetwork, run_sim

    network.py      SimNetwork (alpha, beta, ...), SimBackend, run_sim
    scheduler.py    one baton, a clock per rank, instant deadlock detection
    p2p.py          point-to-point matching and timing; ports.py: the ports' timetables;
                    payloads.py: payload copies; sendrecv.py: a ring step in one call
    express.py      that ring step compiled (express.cpp, express_steps.h), bound as a Group's sendrecv;
                    express_build.py: the build (scripts/setup.sh runs it)
    collectives.py  the provided collectives, computed at once and timed by the cost model
    processes.py    gradings: each rank a process, the scheduler and clocks in an engine process out of
                    the ranks' reach; rank_process.py: a rank's backend, whose every op asks the engine
"""

from .network import SimBackend, SimNetwork, run_sim

__all__ = ["SimNetwork", "SimBackend", "run_sim"]
