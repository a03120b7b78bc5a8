"""The static scan's rules (autograder/scan.py): which names, attributes and strings in a submitted
file an instructor should look at, and the one line that says why. Add a family here."""

from __future__ import annotations

import re

RUNTIME = "minitorch_dist.runtime"
RUNTIME_MODULES_ALLOWED = {"errors"}   # the exceptions (the formulas are minitorch_dist.cost_model, outside the runtime)
DUNDER = re.compile(r"^__\w+__$")
PROCESS = "starts or controls processes outside the runtime's launcher"
SIGNALS = "sends or handles signals; the runtime and the grader use signals to stop ranks and tests"
SERIAL = "loading pickled or marshalled bytes can run arbitrary code"

# Dotted names (a trailing * matches any last component) -> (kind, why).
NAMES: dict[str, tuple[str, str]] = {
    "gc": ("gc", "gc can find and change any live object, the runtime's counters and traces included"),
    "ctypes": ("native", "ctypes reads and writes raw memory, so it can change any object or the interpreter"),
    "cffi": ("native", "cffi reads and writes raw memory, so it can change any object or the interpreter"),
    "sys.modules": ("sys", "sys.modules holds every loaded module; changing it swaps the runtime's code"),
    "sys._getframe": ("frames", "reaches the callers' frames and their variables, the runtime's included"),
    "sys._current_frames": ("frames", "reaches every thread's frames and their variables"),
    "sys.settrace": ("tracing", "a trace hook sees and can change every call, the runtime's included"),
    "sys.setprofile": ("tracing", "a profile hook sees every call, the runtime's included"),
    "sys.addaudithook": ("tracing", "an audit hook sees (and can block) the runtime's own operations"),
    "threading.settrace": ("tracing", "a trace hook sees and can change every call, the runtime's included"),
    "threading.setprofile": ("tracing", "a profile hook sees every call, the runtime's included"),
    "inspect": ("frames", "inspect reaches frames, source and internals of other modules"),
    "importlib": ("dynamic-import", "loads or reloads modules by name at run time, out of this scan's sight"),
    "builtins": ("builtins", "changing builtins changes every module's code, the runtime's included"),
    "minitorch_dist.world_group": ("world-group", "opens a second world Group beside the one the run gives "
                                   "homework code; its traffic is not the run's"),
    "minitorch_dist.runtime.world_group": ("world-group", "opens a second world Group beside the one the run "
                                           "gives homework code; its traffic is not the run's"),
    "torch.distributed": ("torch-distributed", "bypasses the kit's Group, so its traffic is neither counted nor "
                                               "traced; homework code must communicate through `group`"),
    "torch._C._distributed*": ("torch-distributed", "torch's distributed internals bypass the kit's Group"),
    "subprocess": ("process", PROCESS), "multiprocessing": ("process", PROCESS), "pty": ("process", PROCESS),
    "os.system": ("process", PROCESS), "os.popen": ("process", PROCESS), "os.fork": ("process", PROCESS),
    "os.forkpty": ("process", PROCESS), "os.exec*": ("process", PROCESS), "os.spawn*": ("process", PROCESS),
    "os.posix_spawn*": ("process", PROCESS),
    "os.kill": ("signal", SIGNALS), "os.killpg": ("signal", SIGNALS), "signal": ("signal", SIGNALS),
    "socket": ("network", "opens connections outside the runtime's channels, neither counted nor traced"),
    "pickle": ("serialization", SERIAL), "marshal": ("serialization", SERIAL), "dill": ("serialization", SERIAL),
    "cloudpickle": ("serialization", SERIAL), "shelve": ("serialization", SERIAL),
    "os.putenv": ("environ", "changes the environment the runtime and the ranks read their settings from"),
    "os.unsetenv": ("environ", "changes the environment the runtime and the ranks read their settings from"),
    "autograder": ("grader", "imports the autograder's own modules"),
}
FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_code", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
               "ag_frame", "__code__", "__globals__", "__closure__", "__builtins__", "__subclasses__"}
ENV_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
# attributes that hold what the runtime measured in the rank (the traffic counters, the trace, the
# clock): writing through them forges the student-facing figures (graded traffic is measured outside)
RUNTIME_STATE = {"counters", "recorder", "events", "sim_time", "messages_sent", "bytes_sent", "messages_received",
                 "bytes_received", "t0", "clock"}
STATE_WHY = ("writes the runtime's own measurements (traffic counters, trace, clock) from homework code: the "
             "figures students see could be forged")
COMPUTE_WHY = ("charges simulated compute time (`.compute(...)`): it moves the sim clock that time checks read; "
               "allowed only where the handout asks for it")
TEXT = [
    (re.compile(r"/proc\b"), "proc", "mentions /proc, where a process can read other processes' memory and state"),
    (re.compile(r"/dev/(?!null\b)"), "device", "mentions a device path under /dev"),
    (re.compile(r"autograder|results\.json", re.I), "grader", "mentions the autograder or its results file"),
    (re.compile(r"_harness\b|\brank_runs\b|\bcase_suites\b|\brank_inputs\b|\bmake_input\b|\bCase\("), "harness",
     "names the tests' harness (the code that makes and checks inputs): homework code never needs it"),
]
