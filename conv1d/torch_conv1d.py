# conv1d family: PyTorch builders for `kittens bench --vs torch`. Activations
# are token-major [T, dim] as in the Go API; the conv itself runs as F.conv1d
# with groups=dim on [1, dim, W-1+L] (the sequence's initial state or zeros
# prepended, which is the left padding), transposed back to token-major.
# Decode is torch.cat(state, x) times w, summed over the window. Conv states
# are [n_slots, W-1, dim] and are written back, as the kernels do.
import torch.nn.functional as F


def _conv_seq(x, w, b, pre, silu):
    """x [L, dim] token-major, pre [W-1, dim]: returns y [L, dim], final state."""
    xx = torch.cat([pre, x], 0).t().unsqueeze(0)  # [1, dim, W-1+L]
    y = F.conv1d(xx, w.unsqueeze(1), b, groups=w.shape[0])[0].t()
    if silu:
        y = F.silu(y)
    return y, xx[0, :, -(w.shape[1] - 1):].t()


def _varlen_inputs(a, dim):
    lens, width = a["lens"], a["width"]
    dt = a.get("dtype", "bf16")
    n = len(lens)
    x = randn(sum(lens), dim, dtype=dt)
    w = randn(dim, width, dtype=dt, std=0.5)
    b = randn(dim, dtype=dt, std=0.5) if a.get("bias") else None
    states = randn(2 * n, width - 1, dim, dtype=dt)
    slots = torch.randperm(2 * n, device="cuda")[:n]
    n_init = round(a.get("init_share", 0) * n)
    init = [i < n_init for i in range(n)]
    return lens, x, w, b, states, slots, init


def _varlen_fn(lens, init, silu):
    def fn(x, w, b, states, slots):
        ys, finals, off = [], [], 0
        for i, n in enumerate(lens):
            pre = states[slots[i]] if init[i] else x.new_zeros(w.shape[1] - 1, w.shape[0])
            y, fin = _conv_seq(x[off:off + n], w, b, pre, silu)
            ys.append(y)
            finals.append(fin)
            off += n
        states.index_copy_(0, slots, torch.stack(finals))
        return torch.cat(ys).contiguous()
    return fn


@builder("conv1d_fwd")
def _conv1d_fwd(a):
    lens, x, w, b, states, slots, init = _varlen_inputs(a, a["dim"])
    return _varlen_fn(lens, init, a.get("silu", True)), (x, w, b, states, slots)


@builder("conv1d_fwd_split")
def _conv1d_fwd_split(a):
    kd, vd = a["key_dim"], a["value_dim"]
    lens, x, w, b, states, slots, init = _varlen_inputs(a, 2 * kd + vd)
    conv = _varlen_fn(lens, init, a.get("silu", True))

    def fn(x, w, b, states, slots):
        return [t.contiguous() for t in torch.split(conv(x, w, b, states, slots), [kd, kd, vd], -1)]
    return fn, (x, w, b, states, slots)


def _update_inputs(a, dim):
    bsz, n_slots, width = a["batch"], a["n_slots"], a["width"]
    dt = a.get("dtype", "bf16")
    x = randn(bsz, dim, dtype=dt)
    w = randn(dim, width, dtype=dt, std=0.5)
    states = randn(n_slots, width - 1, dim, dtype=dt)
    idx = torch.randperm(n_slots, device="cuda")[:bsz]
    return x, w, states, idx


def _update_fn(silu):
    def fn(x, w, states, idx):
        win = torch.cat([states[idx], x.unsqueeze(1)], 1)  # [B, W, dim]
        y = (win.float() * w.t().float().unsqueeze(0)).sum(1)
        if silu:
            y = F.silu(y)
        states.index_copy_(0, idx, win[:, 1:])
        return y.to(x.dtype)
    return fn


@builder("conv1d_update")
def _conv1d_update(a):
    return _update_fn(a.get("silu", True)), _update_inputs(a, a["dim"])


@builder("conv1d_update_split")
def _conv1d_update_split(a):
    kd, vd = a["key_dim"], a["value_dim"]
    upd = _update_fn(a.get("silu", True))

    def fn(x, w, states, idx):
        return [t.contiguous() for t in torch.split(upd(x, w, states, idx), [kd, kd, vd], -1)]
    return fn, _update_inputs(a, 2 * kd + vd)
