"""Pins the threads of a peer process: the GEMM pool before torch loads, torch's own after.

torch.set_num_threads does not reach the OpenBLAS pthread pool that Debian's torch calls for
matrix products, so the thread count goes into the environment first, from the script's own
--threads flag (default 1). Call pin_gemm_threads() before importing torch or a module that does,
and start_torch() once torch is imported (or found missing).
"""

import argparse
import os


def pin_gemm_threads():
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=1)
    threads = str(pre.parse_known_args()[0].threads)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads


def start_torch(torch, threads):
    """torch's intra-op threads to `threads`, inter-op to 1; False (having said why, as a skip)
    when torch is None, that is, missing."""
    if torch is None:
        print("SKIPPED: PyTorch is missing (Debian: apt-get install python3-torch python3-numpy, "
              "then run with /usr/bin/python3)")
        return False
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    return True
