# torch_act.py: PyTorch builders of the act family (appended to
# bench/torch_base.py). Gated ops take m rows and the OUTPUT width d; their
# input is m x 2d, gate first (or interleaved for swiglu).
import torch._dynamo
import torch.nn.functional as F

# Every gated builder returns the same lambda code object, and torch.compile
# keeps at most recompile_limit (8) specializations per code object: past
# that it silently runs eager. The act cases alone need more.
for _name in ("recompile_limit", "cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, max(getattr(torch._dynamo.config, _name), 64))


def _unary(f):
    def build(a):
        return f, [randn(*a["shape"], dtype=a["dtype"])]
    return build


builder("silu")(_unary(F.silu))
builder("gelu")(_unary(F.gelu))
builder("gelu_tanh")(_unary(lambda x: F.gelu(x, approximate="tanh")))
builder("relu")(_unary(F.relu))
builder("tanh")(_unary(torch.tanh))


def _gated(f):
    def build(a):
        d = a["d"]
        return (lambda x: f(x[..., :d]) * x[..., d:]), [randn(a["m"], 2 * d, dtype=a["dtype"])]
    return build


builder("silu_and_mul")(_gated(F.silu))
builder("gelu_and_mul")(_gated(F.gelu))
builder("gelu_tanh_and_mul")(_gated(lambda x: F.gelu(x, approximate="tanh")))


@builder("mul_and_silu")
def _mul_and_silu(a):
    d = a["d"]
    return (lambda x: x[..., :d] * F.silu(x[..., d:])), [randn(a["m"], 2 * a["d"], dtype=a["dtype"])]


@builder("swiglu")
def _swiglu(a):
    d, alpha, limit = a["d"], 1.702, 7.0

    def fn(x):
        if a.get("layout") == "interleaved":
            g, u = x[..., ::2], x[..., 1::2]
        else:
            g, u = x[..., :d], x[..., d:]
        g = g.clamp(max=limit)
        u = u.clamp(min=-limit, max=limit)
        return g * torch.sigmoid(alpha * g) * (u + 1)
    return fn, [randn(a["m"], 2 * d, dtype=a["dtype"])]
