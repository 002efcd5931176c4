# torch_base.py: the PyTorch side of `kittens bench --vs torch`.
#
# Reads a JSON list of cases on stdin: [{"id": ..., "op": ..., "args": {...}}].
# Each family's snippet (appended after this file, before the call of main
# that bench.Torch adds last) registers builders with @builder("name"). A builder takes the args dict and returns (fn, inputs):
# fn(*inputs) performs the op with PyTorch on fresh random CUDA tensors.
# This script times fn eagerly and torch.compile(fn) with
# triton.testing.do_bench (CUDA events, L2 flushed before every launch,
# median), and prints one JSON object per case on stdout.
#
# torch.compile dominates the run time (seconds a case), so worker processes
# first compile every case in parallel ($KITTENS_TORCH_WORKERS, default 8):
# that fills Inductor's on-disk graph and Triton caches, and the timing pass,
# one case after another in this process, then compiles from the cache.
import json
import math
import multiprocessing
import os
import sys
import traceback

import torch
import triton

BUILDERS = {}
DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
      "i32": torch.int32, "i64": torch.int64}


def builder(name):
    def deco(fn):
        BUILDERS[name] = fn
        return fn
    return deco


def randn(*shape, dtype="bf16", std=1.0):
    return (torch.randn(*shape, device="cuda", dtype=torch.float32) * std).to(DT[dtype])


def time_us(fn, inputs):
    return triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median") * 1e3


def warm_one(c):
    """Compile one case in a worker process; errors surface in the timing pass."""
    try:
        fn, inputs = BUILDERS[c["op"]](c["args"])
        torch.compile(fn, dynamic=False)(*inputs)
        torch.cuda.synchronize()
    except Exception:
        pass
    return c["id"]


def warm(cases):
    todo = [c for c in cases if not c.get("no_compile") and c["op"] in BUILDERS]
    workers = int(os.environ.get("KITTENS_TORCH_WORKERS", "8"))
    if workers <= 1 or len(todo) < 2:
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(min(workers, len(todo)), maxtasksperchild=8) as pool:
        for i, _ in enumerate(pool.imap_unordered(warm_one, todo), 1):
            print(f"compiled {i}/{len(todo)}", file=sys.stderr, flush=True)


def main():
    cases = json.load(sys.stdin)
    warm(cases)
    torch.manual_seed(0)
    for c in cases:
        out = {"id": c["id"]}
        try:
            if c["op"] not in BUILDERS:
                raise KeyError(f"no torch builder named {c['op']!r}")
            fn, inputs = BUILDERS[c["op"]](c["args"])
            out["eager_us"] = time_us(fn, inputs)
            if not c.get("no_compile"):
                # A family's builders return the same lambda for every shape,
                # and dynamo stops recompiling one code object after
                # cache_size_limit (8) shapes, silently running it eagerly
                # from then on: start each case from an empty cache.
                torch._dynamo.reset()
                cfn = torch.compile(fn, dynamic=False)
                out["compile_us"] = time_us(cfn, inputs)
        except Exception as e:  # report, keep going
            out["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        print(json.dumps(out), flush=True)
        torch.cuda.empty_cache()

