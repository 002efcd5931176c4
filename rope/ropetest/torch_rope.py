# torch_rope.py: the rope family's PyTorch builders (appended to bench/torch_base.py).
# The same math as rope.RotateQK and rope.Rope in plain torch, fp32 inside, the way
# HF/vLLM's native paths write it: index the cache by positions, rotate-half for NeoX,
# even/odd interleave for GPT-J, pass-through dims untouched.


def _rope_table(rows, r, theta, dtype):
    inv = 1.0 / (theta ** (torch.arange(0, r, 2, device="cuda", dtype=torch.float64) / r))
    ang = torch.arange(rows, device="cuda", dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().to(DT[dtype]), ang.sin().to(DT[dtype])


def _rotate(x, c, s, neox):
    # x [..., r]; c, s broadcast against [..., r/2]. Returns x's dtype.
    xf, c, s = x.float(), c.float(), s.float()
    h = x.shape[-1] // 2
    if neox:
        x1, x2 = xf[..., :h], xf[..., h:]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)
    x1, x2 = xf[..., 0::2], xf[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2).to(x.dtype)


@builder("rope_bhsd")
def _rope_bhsd(a):
    # y = rope(x), x [B, H, S, D], cos/sin [S, r/2], row s at position s.
    B, H, S, D = a["shape"]
    r, neox = a["rot"], a["style"] == "neox"
    x = randn(B, H, S, D, dtype=a["dtype"])
    cos, sin = _rope_table(S, r, 1e4, a["cache_dtype"])

    def fn(x, cos, sin):
        y = _rotate(x[..., :r], cos, sin, neox)
        return y if r == D else torch.cat((y, x[..., r:]), dim=-1)

    return fn, (x, cos, sin)


@builder("rope_qk")
def _rope_qk(a):
    # q [T, Hq, D] and k [T, Hk, D] rotated in place by cos_sin_cache[positions].
    T, r, neox = a["t"], a["rot"], a["style"] == "neox"
    q = randn(T, a["hq"], a["d"], dtype=a["dtype"])
    k = randn(T, a["hk"], a["d"], dtype=a["dtype"])
    pos = torch.randint(0, a["max_pos"], (T,), device="cuda", dtype=torch.int64)
    cache = torch.cat(_rope_table(a["max_pos"], r, 1e4, a["cache_dtype"]), dim=-1)

    def fn(q, k, pos, cache):
        cs = cache[pos]
        c, s = cs[:, None, : r // 2], cs[:, None, r // 2:]
        q[..., :r] = _rotate(q[..., :r], c, s, neox)
        k[..., :r] = _rotate(k[..., :r], c, s, neox)

    return fn, (q, k, pos, cache)
