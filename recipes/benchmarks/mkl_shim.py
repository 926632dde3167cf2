"""PyTorch's matrix products at full speed on AMD CPUs.

PyTorch's CPU builds multiply float32 matrices with Intel's MKL, which picks its
AVX-512 kernels only on CPUs that report themselves as Intel: on the AMD EPYC
these benchmarks ran on, a (2048, 2048) product reached 187-205 GFLOP/s where
TensorFlow's oneDNN reached 478. MKL asks one function, `mkl_serv_intel_cpu_true`,
and a library preloaded before it that answers 1 makes it take the fast
kernels (the same product: 443 GFLOP/s); it is what AMD users of MKL do. The
benchmarks start their PyTorch peers with it (`LD_PRELOAD`) so that PyTorch is
timed at its best on such a machine; `--no-mkl-shim` leaves it out.
"""

import os
import shutil
import subprocess
import tempfile

SOURCE = "int mkl_serv_intel_cpu_true(void) { return 1; }\n"


def amd_cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "AuthenticAMD" in f.read()
    except OSError:
        return False


def mkl_shim_env():
    """Environment additions for a PyTorch peer process: {"LD_PRELOAD": shim}
    on an AMD CPU where a C compiler can build the shim, else {}."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not amd_cpu() or compiler is None:
        return {}
    folder = tempfile.mkdtemp(prefix="mkl_shim_")
    source, library = os.path.join(folder, "shim.c"), os.path.join(folder, "libmklshim.so")
    with open(source, "w", encoding="utf-8") as f:
        f.write(SOURCE)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", library, source], check=True)
    preload = " ".join(filter(None, [library, os.environ.get("LD_PRELOAD")]))
    return {"LD_PRELOAD": preload}
