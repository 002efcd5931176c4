# torch_permute.py: PyTorch builders of moe_permute and moe_unpermute
# (appended to bench/torch_base.py). args: t, e, k, h, dtype, layout
# ("gather": triton_kernels' gather indices; "align": vLLM's padded
# sorted_token_ids with block "block"), quant (fp8 e4m3 with per-row
# scales). The routing is uniform: each token's k experts are the top k of
# random scores.


def _permute_route(t, e, k):
    """Flat expert ids [t*k] and the gather order p -> f (stable: ascending f within an expert)."""
    ids = torch.rand(t, e, device="cuda").topk(k, dim=-1).indices.flatten()
    return ids, torch.sort(ids, stable=True).indices


def _permute_align(ids, order, e, block):
    """vLLM's sorted_token_ids: each expert's flat ids padded to a multiple of block with t*k, then t*k up to t*k + e*(block-1)."""
    numel = ids.numel()
    counts = torch.bincount(ids, minlength=e)
    padded = (counts + block - 1) // block * block
    start = torch.cumsum(counts, 0) - counts
    start_pad = torch.cumsum(padded, 0) - padded
    sorted_e = ids[order]
    dest = start_pad[sorted_e] + torch.arange(numel, device="cuda") - start[sorted_e]
    sid = torch.full((numel + e * (block - 1),), numel, dtype=torch.int32, device="cuda")
    sid[dest] = order.to(torch.int32)
    return sid


@builder("moe_permute")
def build_moe_permute(a):
    t, e, k, h = a["t"], a["e"], a["k"], a["h"]
    numel = t * k
    x = randn(t, h, dtype=a["dtype"])
    ids, order = _permute_route(t, e, k)
    align = a.get("layout") == "align"
    idx = _permute_align(ids, order, e, a["block"]) if align else order.to(torch.int32)
    quant = a.get("quant", False)

    def fn(x, idx):
        if align:
            live = idx < numel
            y = x.index_select(0, torch.where(live, idx, 0) // k) * live[:, None]
        else:
            y = x.index_select(0, idx // k)
        if not quant:
            return y
        y = y.float()
        scale = y.abs().amax(dim=-1, keepdim=True) / 448.0
        return (y / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale

    return fn, (x, idx)


@builder("moe_unpermute")
def build_moe_unpermute(a):
    t, e, k, h = a["t"], a["e"], a["k"], a["h"]
    _, order = _permute_route(t, e, k)
    y = randn(t * k, h, dtype=a["dtype"])
    pos = torch.empty_like(order)
    pos[order] = torch.arange(t * k, device="cuda")
    w = torch.rand(t, k, device="cuda")

    def fn(y, pos, w):
        rows = y.index_select(0, pos).view(t, k, h).float()
        return (rows * w[..., None]).sum(dim=1).to(y.dtype)

    return fn, (y, pos.to(torch.int32), w)
