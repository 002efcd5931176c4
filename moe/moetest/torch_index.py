# torch_index.py: the PyTorch side of the moe_align_block_size and
# moe_routing_data benchmarks (appended to bench/torch_base.py): the eager
# composition a serving engine without the fused kernels runs, a stable sort
# of the flat expert ids, per-expert counts and their cumsums, and the
# positions by index arithmetic. The counts are a scatter_add rather than
# torch.bincount, which reads the largest id back to the host. args: T, k,
# E, and bs (align) or bm (routing data). Each token takes k distinct
# experts.


def _index_ids(T, k, E):
    return torch.rand(T, E, device="cuda").topk(k, dim=-1).indices.to(torch.int32)


@builder("moe_align_block_size")
def build_moe_align_block_size(a):
    T, k, E, bs = a["T"], a["k"], a["E"], a["bs"]
    ids = _index_ids(T, k, E)
    numel = T * k
    S = -(-(numel + min(E, numel) * (bs - 1)) // bs) * bs
    block_starts = torch.arange(S // bs, device="cuda") * bs
    ar = torch.arange(numel, device="cuda")
    ones = torch.ones(numel, dtype=torch.int64, device="cuda")

    def fn(ids):
        flat = ids.flatten().long()
        experts, order = torch.sort(flat, stable=True)
        cnt = torch.zeros(E, dtype=torch.int64, device="cuda").scatter_add_(0, flat, ones)
        padded = (cnt + bs - 1) // bs * bs
        end = torch.cumsum(padded, 0)
        raw_start = torch.cumsum(cnt, 0) - cnt
        pos = (end - padded)[experts] + ar - raw_start[experts]
        sorted_ids = torch.full((S,), numel, dtype=torch.int32, device="cuda")
        sorted_ids[pos] = order.to(torch.int32)
        owner = torch.searchsorted(end, block_starts, right=True)
        expert_ids = torch.where(block_starts < end[-1], owner, 0).to(torch.int32)
        return sorted_ids, expert_ids, end[-1:].to(torch.int32)

    return fn, (ids,)


@builder("moe_routing_data")
def build_moe_routing_data(a):
    T, k, E, bm = a["T"], a["k"], a["E"], a["bm"]
    ids = _index_ids(T, k, E)
    weights = torch.rand(T, k, device="cuda")
    numel, words = T * k, (E + 31) // 32
    max_tiles = numel if numel <= E else E - 1 + -(-(numel - E + 1) // bm)
    tile = torch.arange(max_tiles, device="cuda")
    ar = torch.arange(numel, device="cuda")
    ones = torch.ones(numel, dtype=torch.int64, device="cuda")
    row_words = torch.arange(T, device="cuda").repeat_interleave(k) * words

    def fn(ids, weights):
        flat = ids.flatten().long()
        _, gather = torch.sort(flat, stable=True)
        scatter = torch.empty_like(gather)
        scatter[gather] = ar
        hist = torch.zeros(E, dtype=torch.int64, device="cuda").scatter_add_(0, flat, ones)
        zero = hist.new_zeros(1)
        offs_raw = torch.cat([zero, torch.cumsum(hist, 0)])
        offs_pad = torch.cat([zero, torch.cumsum((hist + bm - 1) // bm, 0)])
        e = torch.searchsorted(offs_pad[1:], tile, right=True).clamp(max=E - 1)
        pid = torch.where(tile < offs_pad[-1], ((tile - offs_pad[e]) << 16) | e, -1)
        bits = torch.zeros(T * words, dtype=torch.int64, device="cuda")
        bits.scatter_add_(0, row_words + flat // 32, torch.bitwise_left_shift(ones, flat % 32))
        gate = weights.flatten()[gather]
        return (bits.to(torch.int32), hist.to(torch.int32), offs_raw.to(torch.int32), offs_pad.to(torch.int32),
                pid.to(torch.int32), gather.to(torch.int32), scatter.to(torch.int32), gate)

    return fn, (ids, weights)
