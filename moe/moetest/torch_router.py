# torch_router.py: the PyTorch side of the moe_topk benchmarks, the eager
# composition of a router's selection (appended to bench/torch_base.py).
# args: T, E, k, dtype, sigmoid, bias, groups, topk_groups, renormalize,
# scale, shared. Softmax routers (Mixtral, Qwen3): softmax in fp32, topk,
# renormalization. Sigmoid routers: DeepSeek-V3's grouped selection on the
# biased scores (groups outside the kept ones masked with -inf), weights
# gathered from the unbiased scores; Llama-4's top-1 with the shared
# expert's column appended.


@builder("moe_topk")
def build_moe_topk(a):
    T, E, k = a["T"], a["E"], a["k"]
    x = randn(T, E, dtype=a["dtype"])
    bias = randn(E, dtype="f32", std=0.1) if a["bias"] else None
    groups, kg = a["groups"], a["topk_groups"]
    renorm, scale, shared = a["renormalize"], a["scale"] or 1.0, a["shared"]

    def softmax_fn(x):
        p = torch.softmax(x, dim=-1, dtype=torch.float32)
        w, ids = torch.topk(p, k, dim=-1)
        if renorm:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return finish(w, ids)

    def sigmoid_fn(x, bias):
        s = torch.sigmoid(x.float())
        sel = s + bias if bias is not None else s
        if groups:
            gs = sel.view(T, groups, E // groups).topk(2, dim=-1)[0].sum(dim=-1)
            gidx = torch.topk(gs, kg, dim=-1, sorted=False)[1]
            gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
            emask = gmask.unsqueeze(-1).expand(T, groups, E // groups).reshape(T, E)
            sel = sel.masked_fill(emask == 0, float("-inf"))
        ids = torch.topk(sel, k, dim=-1)[1]
        w = s.gather(1, ids)
        if renorm:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return finish(w, ids)

    def finish(w, ids):
        if scale != 1.0:
            w = w * scale
        ids = ids.to(torch.int32)
        if shared:
            w = torch.cat([w, torch.ones(T, 1, device=w.device, dtype=w.dtype)], dim=-1)
            ids = torch.cat([ids, torch.full((T, 1), E, device=ids.device, dtype=ids.dtype)], dim=-1)
        return w, ids

    if a["sigmoid"]:
        return sigmoid_fn, (x, bias)
    return softmax_fn, (x,)
