"""Process transports: Group messages between real processes.

    gloo.py           torch's ProcessGroupGloo (CPU; CUDA tensors are staged through the host)
    mpi.py            mpi4py communicators; mpi_p2p.py: its messages, straight to their receives;
                      mpi_progress.py: polled waits and the progress thread
    nccl.py           one GPU per rank: the provided collectives by NCCL, messages framed over gloo
    framing.py        Group messages over a raw byte transport; framing_works.py: its Works;
                      sendwatch.py: the thread that copies gloo's waiting sends to the listener
    wire.py           the control header every framed message carries, and its checks

A backend here is a Backend (../backend.py) listed in ../backends.py.
"""
