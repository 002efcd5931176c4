# torch_topk.py: the PyTorch side of the topk benchmarks (appended to
# bench/torch_base.py). args: m, n, k, dtype.


@builder("topk")
def build_topk(a):
    x = randn(a["m"], a["n"], dtype=a["dtype"])
    k = a["k"]

    def fn(x):
        return torch.topk(x, k, dim=-1)

    return fn, (x,)
