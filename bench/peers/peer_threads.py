"""Pins the GEMM threads of a peer process before torch loads.

torch.set_num_threads does not reach the OpenBLAS pthread pool that Debian's torch calls for
matrix products, so the thread count goes into the environment first, from the script's own
--threads flag (default 1). Call pin_gemm_threads() before importing torch or a module that does.
"""

import argparse
import os


def pin_gemm_threads():
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=1)
    threads = str(pre.parse_known_args()[0].threads)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads
