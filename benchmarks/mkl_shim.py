"""PyTorch's matrix products at full speed on AMD CPUs.

PyTorch's CPU builds multiply float32 matrices with Intel's MKL, which picks its
AVX-512 kernels only on CPUs that report themselves as Intel: on an AMD EPYC a
(2048, 2048) product reached less than half of TensorFlow's oneDNN rate.
MKL asks one function, `mkl_serv_intel_cpu_true`, and a library preloaded
before it that answers 1 makes it take the fast kernels; it is what AMD users
of MKL do. The benchmarks start their PyTorch peers with it (`LD_PRELOAD`) so
that PyTorch is timed at its best on such a machine; `--no-mkl-shim` leaves it
out. On other CPUs it is not used.

Built once, with the peers' environment (benchmarks/README.md), by a C compiler:

    python benchmarks/mkl_shim.py        # writes benchmarks/build/libmklshim.so
"""

import os
import shutil
import subprocess
import sys

SOURCE = "int mkl_serv_intel_cpu_true(void) { return 1; }\n"
BUILD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build")
LIBRARY = os.path.join(BUILD_DIR, "libmklshim.so")


def amd_cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "AuthenticAMD" in f.read()
    except OSError:
        return False


def build(library=LIBRARY):
    """Compiles the shim into `library`; SystemExit without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit(
            "mkl_shim: no C compiler (cc or gcc) on PATH; install one "
            "(e.g. apt-get install gcc) or run the benchmarks with --no-mkl-shim"
        )
    os.makedirs(os.path.dirname(library), exist_ok=True)
    source = os.path.splitext(library)[0] + ".c"
    with open(source, "w", encoding="utf-8") as f:
        f.write(SOURCE)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def mkl_shim_env(library=LIBRARY):
    """Environment additions for a PyTorch peer process: {"LD_PRELOAD": shim} on
    an AMD CPU, {} elsewhere; SystemExit on an AMD CPU where it is not built."""
    if not amd_cpu():
        return {}
    if not os.path.exists(library):
        raise SystemExit(
            f"mkl_shim: {library} is not built: run `python benchmarks/mkl_shim.py` "
            "once (PyTorch on this AMD CPU would run MKL's slow kernels), or pass "
            "--no-mkl-shim to time it without"
        )
    preload = " ".join(filter(None, [library, os.environ.get("LD_PRELOAD")]))
    return {"LD_PRELOAD": preload}


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else LIBRARY))
