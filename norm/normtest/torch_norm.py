# torch_norm.py: the PyTorch side of the norm family's benchmarks (appended to
# bench/torch_base.py). Each builder makes the same inputs as the Go case and
# returns (fn, inputs); fn is what PyTorch users write for the op. Fused ops
# return both outputs so that torch.compile cannot drop the residual.
import torch.nn.functional as F


def _rows(a):
    return a["M"], a["N"], a["dtype"], a.get("eps", 1e-6)


@builder("rmsnorm")
def _rmsnorm(a):
    M, N, dt, eps = _rows(a)
    x, w = randn(M, N, dtype=dt), randn(N, dtype=dt)
    return (lambda x, w: F.rms_norm(x, (N,), w, eps)), (x, w)


@builder("fused_add_rmsnorm")
def _fused_add_rmsnorm(a):
    M, N, dt, eps = _rows(a)
    x, r, w = randn(M, N, dtype=dt), randn(M, N, dtype=dt), randn(N, dtype=dt)

    def fn(x, r, w):
        s = x + r
        return F.rms_norm(s, (N,), w, eps), s
    return fn, (x, r, w)


@builder("layernorm")
def _layernorm(a):
    M, N, dt, eps = _rows(a)
    x, w, b = randn(M, N, dtype=dt), randn(N, dtype=dt), randn(N, dtype=dt)
    return (lambda x, w, b: F.layer_norm(x, (N,), w, b, eps)), (x, w, b)


@builder("fused_add_layernorm")
def _fused_add_layernorm(a):
    M, N, dt, eps = _rows(a)
    x, r = randn(M, N, dtype=dt), randn(M, N, dtype=dt)
    w, b = randn(N, dtype=dt), randn(N, dtype=dt)

    def fn(x, r, w, b):
        s = x + r
        return F.layer_norm(s, (N,), w, b, eps), s
    return fn, (x, r, w, b)


def _padded(a):
    p = a["pad_to"]
    return (a["N"] + p - 1) // p * p - a["N"]


@builder("rmsnorm_pad")
def _rmsnorm_pad(a):
    M, N, dt, eps = _rows(a)
    pad = _padded(a)
    x, w = randn(M, N, dtype=dt), randn(N, dtype=dt)
    return (lambda x, w: F.pad(F.rms_norm(x, (N,), w, eps), (0, pad))), (x, w)


@builder("fused_add_rmsnorm_pad")
def _fused_add_rmsnorm_pad(a):
    M, N, dt, eps = _rows(a)
    pad = _padded(a)
    x, r, w = randn(M, N, dtype=dt), randn(M, N, dtype=dt), randn(N, dtype=dt)

    def fn(x, r, w):
        s = x.float() + r.float()  # AITER's pad kernel adds in fp32
        y = F.rms_norm(s, (N,), w.float(), eps).to(x.dtype)
        return F.pad(y, (0, pad)), s.to(x.dtype)
    return fn, (x, r, w)


@builder("l2norm_fwd")
def _l2norm_fwd(a):
    M, N, dt, eps = _rows(a)
    x = randn(M, N, dtype=dt)

    def fn(x):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + eps)).to(x.dtype)
    return fn, (x,)


@builder("l2norm_bwd")
def _l2norm_bwd(a):
    M, N, dt, _ = _rows(a)
    y, dy = randn(M, N, dtype=dt, std=N ** -0.5), randn(M, N, dtype=dt)
    rstd = torch.rand(M, device="cuda", dtype=torch.float32) + 0.5

    def fn(y, dy, rstd):
        yf, dyf = y.float(), dy.float()
        dot = (dyf * yf).sum(-1, keepdim=True)
        return (rstd[:, None] * (dyf - dot * yf)).to(y.dtype)
    return fn, (y, dy, rstd)
