"""Launching: how a run's ranks start, get their world group, run the function and report back.

    launch.py      launch(fn, world_size, backend=...): the one entry point (local, sim, or inside
                   a job started by an outside launcher)
    pool.py        warm local rank processes (forked, or started by mpiexec) kept between runs
    mpi_start.py   how a pool's mpi ranks start: mpiexec (locally or through a rank host) and its output
    worker.py      a rank process: builds the world group, runs the functions it is sent
    external.py    launch() inside torchrun / srun / mpirun / python -m minitorch_dist.run
    attach.py      world_group(): a long-lived Group for a program that is already distributed
    host.py, host_link.py   a rank host: ranks started by a helper process (the grader's sandbox)
    channel.py, plain.py    messages between launcher and ranks; plain data for untrusted ranks
    stores.py      the job's TCPStore: its server on 127.0.0.1 in the launcher, the ranks' clients
    per_rank.py    launch(..., rank_args=...): each rank's own arguments, sent to its process alone
    isolation.py   in a grading, each rank in a Landlock domain of its own (no reach into its siblings)
    seccomp.py     ...and a seccomp filter: no System V IPC, no IP socket but TCP, no reach by pid
    pmi_relay.py   in a grading, an mpiexec rank's link to mpiexec carries MPI_Init, Finalize, Abort only
"""
