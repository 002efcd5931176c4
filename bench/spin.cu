// spin.cu: the harness's own kernels. spin busy-waits on the global timer:
// the harness queues it before the timed launches so the host can run ahead
// of the GPU, and the events around each launch then measure GPU time, not
// launch latency. empty does nothing: timed as a case (Floor), it is the
// launch floor every case of the process pays.
#include "kittens.cuh"

extern "C" __global__ void spin(u64 ns) { spin_ns(ns); }

extern "C" __global__ void empty() {}
