"""Observation: what a run did and what each rank is doing now.

    trace.py      per-rank counters (messages, bytes) and trace events of every Group call
    timeline.py   trace events as Chrome trace JSON (Perfetto) or a matplotlib timeline
    tracker.py    what each rank is blocked in now (for deadlock reports on process backends)
    deadlock.py   wait-for graphs and the deadlock report every backend prints
    kernel_traffic.py  the bytes between rank processes as the kernel counts them (RunResult.wire)
    namespace_counts.py  the whole network namespace's counters: connections opened, octets sent
    run_meter.py       one launch's traffic: the ranks' processes found from the launcher's connections
    traffic_check.py   the runtime's counters against those bytes (what the grader checks)
    wire_framing.py    what gloo and MPICH add on the wire besides the payload (traffic_check's figures)
    store_check.py     what each rank received from the job's store, against what its sub-groups need
"""
