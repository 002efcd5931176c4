// spin.cu: a kernel that busy-waits on the global timer. The harness queues
// it before the timed launches so the host can run ahead of the GPU: the
// events around each launch then measure GPU time, not launch latency.
#include "kittens.cuh"

extern "C" __global__ void spin(u64 ns) { spin_ns(ns); }
