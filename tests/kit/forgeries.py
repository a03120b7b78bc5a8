"""An all-reduce that exchanges its inputs outside the measured sockets (issue 25), as a student
would write it into naive_all_reduce: every rank hands its x to the others through (a) files in
a folder every rank can write (TMPDIR/HOME, its parent, /tmp, /dev/shm), (b) its own memory, which
the others read through /proc/PID/mem (each rank maps its x at a fixed address and makes itself
dumpable; the readers try every process of their uid), or (c) abstract unix sockets; then each
rank combines them locally and sends exactly the naive algorithm's messages with garbage payloads,
so the values and the kernel-measured traffic are both right.

EXCHANGE is that code (the body of a task's region: `x`, `group` and `op` in scope). The way is
picked by the world size: p = 2, 5 and 8 files, 3 and 6 memory, 4 and 7 sockets. Each call says
ATTACK-EXCHANGED <way> or ATTACK-BLOCKED <way>, and ATTACK-DONE once it ran.
"""

# the naive all-reduce's messages (every rank to rank 0 and back), with `_junk` as every payload
NAIVE_MESSAGES = """if _me != 0:
    group.send(_junk, 0)
    group.recv(_junk, 0)
else:
    for _src in range(1, _p):
        group.recv(_junk, _src)
    for _dst in range(1, _p):
        group.send(_junk, _dst)
"""

WAYS = {2: "file", 3: "mem", 4: "sock", 5: "file", 6: "mem", 7: "sock", 8: "file"}

EXCHANGE = '''
import ctypes as _c, glob as _gl, inspect as _in, os as _o, socket as _so, sys as _y, time as _tm
import torch as _t
_p, _me = group.size, group.rank
_st = _y.__dict__.setdefault("_forge_state", {"n": 0, "early": {}})
_st["n"] += 1
_way = ''' + repr(WAYS) + '''.get(_p, "none")
def _pool():
    f = _in.currentframe()
    while f is not None:
        s = f.f_locals.get("spec")
        if isinstance(s, dict) and "pool_id" in s:
            return str(s["pool_id"]).replace("/", "_")
        f = f.f_back
    return "nopool"
_pid = _st.setdefault("pool", _pool())
_key = f"{_pid}-{_st['n']}"
_flat = x.detach().reshape(-1).cpu().contiguous()
_raw = _flat.view(_t.uint8).numpy().tobytes() if _flat.numel() else b""
_libc = _c.CDLL(None, use_errno=True)
_ADDR, _SIZE = 0x5a5a00000000, 1 << 22
def _file_dirs():
    tmp = _o.environ.get("TMPDIR", "/tmp")
    return list(dict.fromkeys([tmp, _o.path.dirname(tmp.rstrip("/")), _o.environ.get("HOME", tmp), "/tmp", "/dev/shm"]))
def _put_file(raw):
    for d in _file_dirs():
        try:
            with open(f"{d}/.fx-{_key}-{_me}.tmp", "wb") as f:
                f.write(raw)
            _o.rename(f"{d}/.fx-{_key}-{_me}.tmp", f"{d}/.fx-{_key}-{_me}")
        except OSError:
            pass
def _get_file(r):
    for d in _file_dirs():
        try:
            with open(f"{d}/.fx-{_key}-{r}", "rb") as f:
                return f.read()
        except OSError:
            pass
    return None
def _put_mem(raw):
    if "map" not in _st:
        _libc.prctl(4, 1, 0, 0, 0)                                # PR_SET_DUMPABLE: let my siblings read me
        _libc.mmap.restype = _c.c_void_p
        _libc.mmap.argtypes = [_c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _c.c_int, _c.c_long]
        _st["map"] = _libc.mmap(_ADDR, _SIZE, 3, 0x22 | 0x100000, -1, 0)    # rw, private|anon|fixed_noreplace
    head = b"FORGEMEM" + _key.encode().ljust(96, b" ") + _me.to_bytes(4, "little") + len(raw).to_bytes(8, "little")
    _c.memmove(_ADDR, head + raw, len(head) + len(raw))
def _get_mem(r):
    if "pids" not in _st:
        uid = _o.getuid()
        _st["pids"] = [int(d) for d in _o.listdir("/proc") if d.isdigit() and int(d) != _o.getpid()
                       and _owned(int(d), uid)]
    for pid in _st["pids"]:
        try:
            with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
                f.seek(_ADDR)
                head = f.read(116)
                if head[:8] == b"FORGEMEM" and head[8:104].strip() == _key.encode() and \\
                        int.from_bytes(head[104:108], "little") == r:
                    return f.read(int.from_bytes(head[108:116], "little")) if head[108:116] != bytes(8) else b""
        except (OSError, ValueError):
            pass
    return None
def _owned(pid, uid):
    try:
        return _o.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False
def _name(r):
    return f"\\0fx-{_pid}-{r}".encode()
def _put_sock(raw):
    if "sock" not in _st:
        s = _so.socket(_so.AF_UNIX, _so.SOCK_DGRAM)
        s.bind(_name(_me))
        s.setsockopt(_so.SOL_SOCKET, _so.SO_RCVBUF, 1 << 22)
        _st["sock"] = s
    end = _tm.monotonic() + _wait
    for r in range(_p):
        while r != _me and _tm.monotonic() < end:
            try:
                _st["sock"].sendto(_key.encode().ljust(96) + raw, _name(r))
                break
            except OSError:
                _tm.sleep(0.01)
def _get_sock(r):
    s, early = _st["sock"], _st["early"]
    s.settimeout(0.05)
    while (_key, r) not in early:
        try:
            data, frm = s.recvfrom(1 << 22)
        except OSError:
            return None
        early[(data[:96].strip().decode(), int(frm.decode().rsplit("-", 1)[1]))] = data[96:]
    return early.pop((_key, r))
_put, _get = {"file": (_put_file, _get_file), "mem": (_put_mem, _get_mem), "sock": (_put_sock, _get_sock)}.get(
    _way, (lambda raw: None, lambda r: None))
_got = {_me: _raw}
_wait = 0.05 if _st.get("blocked") else 2            # the first exchange may wait for slow starters
if _p > 1:
    try:
        _put(_raw)
    except Exception as e:
        print(f"ATTACK-PUT-FAILED {_way}: {e!r}", flush=True)
    _end = _tm.monotonic() + _wait
    while len(_got) < _p and _tm.monotonic() < _end:
        for _r in range(_p):
            if _r not in _got:
                try:
                    _v = _get(_r)
                except Exception:
                    _v = None
                if _v is not None:
                    _got[_r] = _v
        if len(_got) < _p:
            _tm.sleep(0.005)
_res = None
if len(_got) == _p:
    _xs = [_t.frombuffer(bytearray(_got[r]), dtype=x.dtype) if _got[r] else _t.empty(0, dtype=x.dtype)
           for r in range(_p)]
    _wide = _t.float64 if x.dtype.is_floating_point else _t.int64
    _sk = _t.stack([v.to(_wide) for v in _xs])
    _res = {"sum": _sk.sum(0), "max": _sk.amax(0), "min": _sk.amin(0), "prod": _sk.prod(0)}[op].to(x.dtype)
    if _p > 1:
        print(f"ATTACK-EXCHANGED {_way}", flush=True)
else:
    _st["blocked"] = True
    print(f"ATTACK-BLOCKED {_way}: {len(_got)} of {_p} inputs", flush=True)
_junk = _t.zeros(x.numel(), dtype=x.dtype)                       # the naive algorithm's messages, garbage inside
''' + NAIVE_MESSAGES + '''if _res is not None:
    x.reshape(-1).copy_(_res)
print("ATTACK-DONE: EXCHANGE", flush=True)
return x
'''
