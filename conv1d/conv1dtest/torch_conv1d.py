# conv1d family: PyTorch builders for `kittens bench --vs torch`. Activations
# are token-major [T, dim] as in the Go API; the conv itself runs as F.conv1d
# with groups=dim on [1, dim, W-1+L] (the sequence's initial state or zeros
# prepended, which is the left padding), transposed back to token-major.
# Decode is torch.cat(history, x) times w, summed over each token's window;
# the history and the state columns written back follow the step's state rule
# (conv1d.Decode): the plain shift, speculative decoding
# (num_accepted_tokens) or the circular buffer (cache_seqlens). Conv states
# are [n_slots, state_len, dim] (state_len W-1 unless the case says) and are
# written back, as the kernels do.
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


@builder("conv1d_dense")
def _conv1d_dense(a):
    """x [B, L, dim], bias and SiLU; with "states", initial states [B, W-1, dim]
    are prepended and the last W-1 columns written to final states."""
    bsz, n, dim, width = a["batch"], a["seq_len"], a["dim"], a["width"]
    dt = a.get("dtype", "bf16")
    x = randn(bsz, n, dim, dtype=dt)
    w = randn(dim, width, dtype=dt, std=0.5)
    b = randn(dim, dtype=dt, std=0.5)
    states = a.get("states", False)
    init = randn(bsz, width - 1, dim, dtype=dt) if states else None
    final = torch.empty_like(init) if states else None

    def fn(x, w, b, init, final):
        pre = init if init is not None else x.new_zeros(bsz, width - 1, dim)
        xx = torch.cat([pre, x], 1).transpose(1, 2)  # [B, dim, W-1+L]
        y = F.silu(F.conv1d(xx, w.unsqueeze(1), b, groups=dim)).transpose(1, 2).contiguous()
        if final is not None:
            final.copy_(xx[:, :, -(width - 1):].transpose(1, 2))
        return y
    return fn, (x, w, b, init, final)


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
    seq_len = a.get("seq_len", 0)  # 0: x [B, dim], one token a sequence
    dt = a.get("dtype", "bf16")
    x = randn(bsz, seq_len, dim, dtype=dt) if seq_len else randn(bsz, dim, dtype=dt)
    w = randn(dim, width, dtype=dt, std=0.5)
    states = randn(n_slots, a.get("state_len", width - 1), dim, dtype=dt)
    idx = torch.randperm(n_slots, device="cuda")[:bsz]
    return x, w, states, idx


def _tokens(x):
    """x [B, dim] or [B, L, dim] as [B, L, dim]."""
    return x if x.dim() == 3 else x.unsqueeze(1)


def _conv_window(win, x, w, silu):
    """win [B, W-1+L, dim], each sequence's history then its L inputs: y in x's shape."""
    y = (win.unfold(1, w.shape[1], 1).float() * w.float()).sum(-1)  # [B, L, dim]
    if silu:
        y = F.silu(y)
    return y.to(x.dtype).view(x.shape)


def _cols(rows, start, n):
    """Columns start[b] + [0, n) of each sequence's state row: index pairs for states[...]."""
    return rows[:, None], start[:, None] + torch.arange(n, device=start.device)


def _update_fn(silu):
    """The plain shift, one token a sequence: the state is the window's last W-1 columns."""
    def fn(x, w, states, idx):
        win = torch.cat([states[idx], x.unsqueeze(1)], 1)  # [B, W, dim]
        y = (win.float() * w.t().float().unsqueeze(0)).sum(1)
        if silu:
            y = F.silu(y)
        states.index_copy_(0, idx, win[:, 1:])
        return y.to(x.dtype)
    return fn


def _update_spec_fn(silu):
    """num_accepted_tokens a: history = state columns [a-1, a-1+W-1); the row
    becomes its columns [a, a+state_len-L) followed by the L inputs."""
    def fn(x, w, states, idx, accepted):
        xt = _tokens(x)
        first = accepted.long() - 1
        hist = states[_cols(idx, first, w.shape[1] - 1)]  # [B, W-1, dim]
        kept = states[_cols(idx, first + 1, states.shape[1] - xt.shape[1])]
        y = _conv_window(torch.cat([hist, xt], 1), x, w, silu)
        states.index_copy_(0, idx, torch.cat([kept, xt], 1))
        return y
    return fn


def _update_circular_fn(silu):
    """cache_seqlens p: history = state columns (p-(W-1)+m) mod state_len;
    input i goes to column (p+i) mod state_len, the other columns stay (only
    the last state_len inputs are written, so that no column is written twice)."""
    def fn(x, w, states, idx, cache_seqlens):
        xt = _tokens(x)
        sl, n, p = states.shape[1], xt.shape[1], cache_seqlens.long()
        rows, cols = _cols(idx, p - (w.shape[1] - 1), w.shape[1] - 1)
        y = _conv_window(torch.cat([states[rows, cols % sl], xt], 1), x, w, silu)
        m = min(n, sl)
        rows, cols = _cols(idx, p + n - m, m)
        states[rows, cols % sl] = xt[:, n - m:]
        return y
    return fn


@builder("conv1d_update")
def _conv1d_update(a):
    return _update_fn(a.get("silu", True)), _update_inputs(a, a["dim"])


@builder("conv1d_update_spec")
def _conv1d_update_spec(a):
    """L = seq_len tokens a sequence, accepted counts random in [1, L] as the Go cases draw them."""
    inputs = _update_inputs(a, a["dim"])
    accepted = torch.randint(1, a["seq_len"] + 1, (a["batch"],), device="cuda", dtype=torch.int32)
    return _update_spec_fn(a.get("silu", True)), (*inputs, accepted)


@builder("conv1d_update_circular")
def _conv1d_update_circular(a):
    """Ring positions random in [0, 4 state_len), the first near 2^30, as the Go cases draw them."""
    inputs = _update_inputs(a, a["dim"])
    sl = inputs[2].shape[1]
    seqlens = torch.randint(0, 4 * sl, (a["batch"],), device="cuda", dtype=torch.int32)
    seqlens[0] = 2**30 + int(torch.randint(64, ()))
    return _update_circular_fn(a.get("silu", True)), (*inputs, seqlens)


@builder("conv1d_update_split")
def _conv1d_update_split(a):
    kd, vd = a["key_dim"], a["value_dim"]
    upd = _update_fn(a.get("silu", True))

    def fn(x, w, states, idx):
        return [t.contiguous() for t in torch.split(upd(x, w, states, idx), [kd, kd, vd], -1)]
    return fn, _update_inputs(a, 2 * kd + vd)
