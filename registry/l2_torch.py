# l2_torch.py: the PyTorch side of BenchmarkL2Leftovers (l2_test.go). How much L2 do the evict-last lines that a
# large hinted launch leaves behind take from the kernels after it, when nothing hands them back, and does
# torch.compile leave them too? A Triton kernel y = 2x sweeps 512 MiB reading under an L2 evict-last policy (the
# policy torch.compile's reductions read with), evict-first, or plainly; torch.compile's and eager's rmsnorm
# 16384x8192 are the other states. After each, with no reset in between, probes run: torch.sum over buffers of
# 8-56 MiB (each read repeatedly: a buffer that still fits in L2 is read from it) and cuBLAS bf16 GEMMs.
# Prints JSON: µs medians per state and round, the sweep's own times, and the sweep's PTX loads.
#
#   python3 registry/l2_torch.py > l2.json
import ctypes, json, statistics, sys, time
import torch, triton, triton.language as tl

cu = ctypes.CDLL("libcuda.so.1")
def reset():
    torch.cuda.synchronize()
    r = cu.cuCtxResetPersistingL2Cache()
    assert r == 0, r
    torch.cuda.synchronize()

@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr, POLICY: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    v = tl.load(x + off, mask=m, eviction_policy=POLICY)
    tl.store(y + off, v * 2, mask=m)

N = 256 << 20  # bf16 elements: 512 MiB read, 512 MiB written
X = torch.randn(N, device="cuda", dtype=torch.bfloat16)
Y = torch.empty_like(X)
def sweep(policy):
    return scale[(triton.cdiv(N, 4096),)](X, Y, N, BLOCK=4096, POLICY=policy, num_warps=8)

def timed(fn, runs=30):
    ts = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100000)  # the host queues the launch while the GPU spins: events time the GPU alone
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)

res = {"device": torch.cuda.get_device_name(), "L2": torch.cuda.get_device_properties(0).L2_cache_size}
# 1. the sweep itself under each policy (gain of the hint in Triton), after a reset each time
for p in ["", "evict_last", "evict_first"]:
    sweep(p)
    ts = []
    for _ in range(5):
        reset(); ts.append(timed(lambda: sweep(p), runs=10))
    res[f"sweep_us[{p or 'plain'}]"] = ts

bufs = {s: torch.randn((s << 20) // 4, device="cuda") for s in (8, 16, 24, 28, 32, 36, 40, 44, 48, 56)}
gemms = {f"{m}x{n}x{k}": (torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, n, device="cuda", dtype=torch.bfloat16))
         for m, n, k in [(4096, 4096, 4096), (512, 8192, 8192), (32, 8192, 8192)]}
def probes():
    out = {}
    for s, b in bufs.items():
        out[f"sum {s} MiB"] = timed(lambda: b.sum())
    for name, (a, w) in gemms.items():
        out[f"gemm {name}"] = timed(lambda: a @ w)
    return out
H = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
Wn = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
crms = torch.compile(rms)
def eager_rms():
    torch.nn.functional.rms_norm(H, (8192,), Wn, 1e-6)
def sweep_then_reset():
    sweep("evict_last")
    torch.cuda.synchronize()
    t0 = time.perf_counter(); reset(); res.setdefault("reset_host_us", []).append((time.perf_counter() - t0) * 1e6)
# Each state is what runs between a reset and the probes.
STATES = {
    "clean": lambda: None,
    "evict_last": lambda: sweep("evict_last"),
    "evict_first": lambda: sweep("evict_first"),
    "plain": lambda: sweep(""),
    "evict_last+reset": sweep_then_reset,
    "compiled rmsnorm": lambda: crms(H, Wn),
    "eager rmsnorm": eager_rms,
}
crms(H, Wn); eager_rms()
probes()  # warm up cuBLAS and the reductions

for rnd in range(3):
    for state, leave in STATES.items():
        reset()
        leave()
        torch.cuda.synchronize()
        p = probes()
        # do the leftovers survive all that traffic? probe the 40 MiB read once more after the GEMMs
        p["sum 40 MiB after gemms"] = timed(lambda: bufs[40].sum())
        res.setdefault(state, []).append(p)
for p in ["evict_last", "evict_first"]:
    ptx = sweep(p).asm["ptx"]
    res[f"ptx[{p}]"] = [l.strip() for l in ptx.splitlines() if "policy" in l or "evict" in l or "ld.global" in l]
json.dump(res, sys.stdout, indent=1)
