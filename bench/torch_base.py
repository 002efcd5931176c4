# torch_base.py: the PyTorch side of `kittens bench -vs torch`.
#
# Reads a JSON list of cases on stdin: [{"id": ..., "op": ..., "args": {...}}].
# Each family's snippet (appended after this file, before the call of main
# that bench.Torch adds last) registers builders with @builder("name"). A builder takes the args dict and returns (fn, inputs):
# fn(*inputs) performs the op with PyTorch on fresh random CUDA tensors.
# This script times fn eagerly and torch.compile(fn) the way kittens times
# its own ops (bench/timing.go), so that the two sides compare: the
# builder is called once per input set (the case's "sets", as many as our
# run rotated), then "runs" calls go back to back over the rotated sets,
# an event between each, behind a spin kernel that keeps the GPU busy while
# the host queues them (see time_us); twice, keeping the second round; the
# median (of an even count the upper of the middle two, as median in
# bench/timing.go takes it). With "graph" in a case, as with kittens bench
# -graph, that many calls are captured into one CUDA graph and each timed
# run replays it (time_us_graph); with "pdl" as well (kittens bench -pdl, our
# kernels captured as programmatic dependent launches), torch.compile's
# Triton kernels are compiled with Inductor's triton.enable_pdl, so that
# they may overlap in the graph as ours do (compile_options). It prints one
# JSON object per case on stdout.
#
# Before each timing, L2's persisting lines are reset to normal priority, as
# bench.Measure resets them before each of our cases: torch.compile's
# reductions read under an L2 evict-last policy as our kernels do, and the
# lines a large case leaves would take L2 from the cases after it.
#
# There is no L2 flush between calls (triton.testing.do_bench clears the L2
# with a 256 MiB memset before each launch, which adds 0.6-1.1 us to a small
# kernel, ours and torch.compile's alike): both sides are timed the same way.
#
# torch.compile dominates the run time (seconds a case), so worker processes
# first compile every case in parallel ($KITTENS_TORCH_WORKERS, default 8):
# that fills Inductor's on-disk graph and Triton caches, and the timing pass,
# one case after another in this process, then compiles from the cache.
# Workers do not save their autotuning choices (autotune_local_cache off):
# Inductor times the candidate configs of a reduction kernel at its first
# call, and in a worker that runs beside the others on the same GPU; the
# config saved from there would be the timing pass's too. The timing pass
# makes its own choice, alone on the GPU, in its first round, and does not
# save it either: each run's choice is its own, so that the median of
# several runs (kittens report) is over independent choices, not one
# choice reused from the first run's cache.
import contextlib
import ctypes
import json
import math
import multiprocessing
import os
import sys
import time
import traceback

import torch
import torch._inductor.config

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


# SPIN_HZ converts the spin's seconds to the cycles torch.cuda._sleep
# counts: the highest SM clock of the GPUs we time on (H100/H200 boost at
# 1.98 GHz), so that the spin is never shorter than asked.
SPIN_HZ = 2.0e9
MAX_SPIN_TRIES = 4
# CHUNK_HOST_S bounds the host time of the calls queued behind one spin.
# The driver's launch queue holds about a thousand entries; an eager op of
# twenty kernels (rope: 0.19 ms of host time a call) fills it within 50
# calls, the host then waits for the spin to end, and a spin sized to the
# queueing time grows without bound (34 s for one rope case). Behind each
# spin go as many calls as take CHUNK_HOST_S to queue: all of them for a
# one-kernel op, ten for such an eager op.
CHUNK_HOST_S = 2e-3
MAX_SPIN_S = 0.05


_libcuda = None


@builder("_empty_kernel")
def empty_kernel(args):
    """The launch floor, as bench.Floor times ours: torch.cuda._sleep(0), a
    one-thread kernel that reads the clock once, timed as the cases."""
    return (lambda: torch.cuda._sleep(0)), ()


def reset_persisting_l2():
    """Returns every L2 line an evict-last access left to normal priority
    (cuCtxResetPersistingL2Cache), as bench.Measure does before our cases."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    torch.cuda.synchronize()  # makes torch's context current on this thread
    r = _libcuda.cuCtxResetPersistingL2Cache()
    if r != 0:
        raise RuntimeError(f"cuCtxResetPersistingL2Cache: CUDA error {r}")


def time_us(fn, input_sets, runs):
    """Median GPU time of fn in us, as bench.timeRuns measures ours.

    fn is called on every input set first. A compiled fn that would compile
    again for another set (dynamo may guard on more than shapes, e.g. for
    inputs it mutates) is timed on the first set alone, rather than spend a
    compile on each set or, past dynamo's recompile limit, time eager code.

    The outputs of each set's last call are kept until the next call on
    that set, so that outputs rotate over as many buffers as the inputs, as
    ours do. Dropped at once, the caching allocator hands every call the
    block the previous call freed, still in the L2: on an H200 that took 10%
    off torch.compile's rmsnorm at 65536x128 (11.17 against 12.64 us) and
    gave nothing to wide rows.

    The calls go back to back in chunks (see CHUNK_HOST_S), each behind a
    spin long enough to queue it, an event between every two calls. When
    the host did not queue a chunk within its spin, the GPU may have waited
    for it: that chunk runs again with twice the queueing time as its spin,
    at most MAX_SPIN_TRIES times and MAX_SPIN_S long. A chunk that outlasts
    all of them belongs to an fn that waits for the GPU itself (a host
    sync, such as indexing with a CUDA scalar): it is kept as it is, and so
    are the later chunks, at their first spin. Two rounds; the second
    counts. L2's persisting lines are reset first, as ours are.
    """
    reset_persisting_l2()
    fn(*input_sets[0])
    try:
        with torch._dynamo.config.patch(error_on_recompile=True):
            for inputs in input_sets[1:]:
                fn(*inputs)
    except torch._dynamo.exc.RecompileError:  # keep to the set compiled for
        input_sets = input_sets[:1]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(10):
        fn(*input_sets[i % len(input_sets)])
    host = (time.perf_counter() - t0) / 10  # host cost of one call
    torch.cuda.synchronize()
    chunk = max(1, min(runs, int(CHUNK_HOST_S / host)))
    kept = [None] * len(input_sets)  # the outputs of the last call on each set

    def run_chunk(first, n, spin):
        """Queues calls first..first+n-1 behind a spin; their times and the queueing time."""
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        torch.cuda._sleep(int(spin * SPIN_HZ))
        t0 = time.perf_counter()
        ev[0].record()
        for i in range(first, first + n):
            k = i % len(input_sets)
            kept[k] = None  # its memory serves this call's outputs
            kept[k] = fn(*input_sets[k])
            ev[i - first + 1].record()
        queued = time.perf_counter() - t0
        torch.cuda.synchronize()
        return [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(n)], queued

    host_bound = False  # a chunk outlasted every spin: fn waits for the GPU
    for _ in range(2):
        times = []
        for first in range(0, runs, chunk):
            n = min(chunk, runs - first)
            spin = n * max(3 * host, 20e-6)
            for tries in range(1, MAX_SPIN_TRIES + 1):
                t, queued = run_chunk(first, n, spin)
                if queued <= 0.8 * spin or host_bound:
                    break
                if tries == MAX_SPIN_TRIES or spin >= MAX_SPIN_S:
                    host_bound = True
                    break
                spin = min(2 * queued, MAX_SPIN_S)  # the GPU may have waited for the host: again
            times += t
    return sorted(times)[runs // 2]  # the upper middle, as median in bench/timing.go


def time_us_graph(fn, input_sets, runs, per):
    """Median GPU time of one call of fn in us when per calls, rotating over
    the input sets, are captured into one CUDA graph and each timed run
    replays it, as bench.Measure's Graph option times ours (per is already
    a whole number of rotations). Every set is called once on a side stream
    first, as torch.cuda.graph asks, which compiles a compiled fn outside
    the capture. The calls' outputs live in the graph's memory pool, one
    buffer each: as many as ours where per equals the sets (the cases of a
    few MB), more where a larger case rotates fewer sets.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for inputs in input_sets:
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    outputs = []
    with torch.cuda.graph(g):
        for i in range(per):
            outputs.append(fn(*input_sets[i % len(input_sets)]))
    return time_us(lambda: g.replay(), [()], runs) / per


def compile_options(c):
    """The Inductor settings a case's torch.compile runs under: PDL launches
    where the case asks for them (a PyTorch whose Inductor lacks the option
    fails the case rather than time it without)."""
    if not c.get("pdl"):
        return contextlib.nullcontext()
    if not hasattr(torch._inductor.config.triton, "enable_pdl"):
        raise RuntimeError("this PyTorch's Inductor has no triton.enable_pdl for dependent launches")
    return torch._inductor.config.patch({"triton.enable_pdl": True})


def warm_one(c):
    """Compile one case in a worker process; errors surface in the timing pass."""
    try:
        torch._inductor.config.autotune_local_cache = False
        fn, inputs = BUILDERS[c["op"]](c["args"])
        with compile_options(c):
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
    torch._inductor.config.autotune_local_cache = False
    torch.manual_seed(0)
    for k, c in enumerate(cases, 1):
        t0 = time.perf_counter()
        t_eager = t0
        out = {"id": c["id"]}
        try:
            if c["op"] not in BUILDERS:
                raise KeyError(f"no torch builder named {c['op']!r}")
            fn, inputs = BUILDERS[c["op"]](c["args"])
            sets = [inputs] + [BUILDERS[c["op"]](c["args"])[1] for _ in range(c.get("sets", 1) - 1)]
            runs = c.get("runs", 100)
            timer = time_us
            if c.get("graph"):
                def timer(f, s, r):
                    return time_us_graph(f, s, r, c["graph"])
            out["eager_us"] = timer(fn, sets, runs)
            t_eager = time.perf_counter()
            if not c.get("no_compile"):
                # A family's builders return the same lambda for every shape,
                # and dynamo stops recompiling one code object after
                # cache_size_limit (8) shapes, silently running it eagerly
                # from then on: start each case from an empty cache.
                torch._dynamo.reset()
                cfn = torch.compile(fn, dynamic=False)
                with compile_options(c):
                    out["compile_us"] = timer(cfn, sets, runs)
        except Exception as e:  # report, keep going
            out["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        print(json.dumps(out), flush=True)
        # Progress, so that a case that takes long shows which it is.
        t1 = time.perf_counter()
        print(f"timed {k}/{len(cases)} {c['id']} in {t1 - t0:.1f} s (eager {t_eager - t0:.1f} s, compile {t1 - t_eager:.1f} s)",
              file=sys.stderr, flush=True)
        torch.cuda.empty_cache()

