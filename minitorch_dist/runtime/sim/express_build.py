"""Build the sim's compiled sendrecv (express.cpp; express.py loads it): scripts/setup.sh runs this.

    .venv/bin/python -m minitorch_dist.runtime.sim.express_build

Compiles with the machine's C++ compiler (CXX, else c++, g++ or clang++) against the
installed torch's headers and libraries (their paths from torch.utils.cpp_extension), about
10 s, into the first writable folder of express.folders(). Without a compiler it says so and
the sim keeps its Python path; it never fails the setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import torch

from .express import SOURCE, SUFFIX, build_path, folders, key


def build() -> tuple[str | None, str]:
    """Compile express.cpp into the first writable folder: (path of the build or None, what happened)."""
    k = key()
    for folder in folders():
        path = build_path(folder, k)
        if os.path.exists(path):
            return path, f"already built: {path}"
    if sys.platform == "win32":
        return None, "not built: the compiled sendrecv is built on Linux and macOS only"
    named = os.environ.get("CXX")
    compiler = shutil.which(named) if named else shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        return None, f"not built: no C++ compiler ({f'CXX={named} is not a program' if named else 'c++, g++ or clang++'})"
    from torch.utils import cpp_extension
    flags = ["-O2", "-shared", "-fPIC", "-std=c++20", "-w",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             *(f"-I{p}" for p in cpp_extension.include_paths()), f"-I{sysconfig.get_paths()['include']}"]
    libs = [f"-L{p}" for p in cpp_extension.library_paths()] + [
        f"-Wl,-rpath,{p}" for p in cpp_extension.library_paths()] + ["-ltorch_python", "-lc10"]
    if sys.platform == "darwin":
        libs += ["-undefined", "dynamic_lookup"]      # Python's symbols come from the interpreter
    errors = []
    for folder in folders():
        try:
            os.makedirs(os.path.join(folder, k), exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=SUFFIX, dir=os.path.join(folder, k))
            os.close(fd)
        except OSError as exc:
            errors.append(f"{folder}: {exc}")
            continue
        path = build_path(folder, k)
        done = subprocess.run([compiler, *flags, SOURCE, "-o", tmp, *libs],
                              capture_output=True, text=True)
        if done.returncode != 0:
            os.unlink(tmp)
            return None, f"not built: {compiler} failed:\n{done.stderr[-3000:]}"
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)            # whole or absent: a reader never sees half a file
        return path, f"built: {path}"
    return None, "not built: no writable folder (" + "; ".join(errors) + ")"


if __name__ == "__main__":
    built, said = build()
    print(f"sim compiled sendrecv {said}" + ("" if built else "; the sim runs its Python path (same results, slower)"))
