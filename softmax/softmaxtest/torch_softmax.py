# softmax family: torch.softmax over the last dim, fp32 math inside torch for
# bf16 inputs too (it upcasts internally), output in the input dtype.
@builder("softmax")
def build_softmax(a):
    x = randn(a["M"], a["N"], dtype=a["dtype"], std=a.get("std", 1.0))
    scale = a.get("scale", 1.0)
    if scale == 1.0:
        return (lambda x: torch.softmax(x, -1)), (x,)
    return (lambda x: torch.softmax(x * scale, -1)), (x,)
