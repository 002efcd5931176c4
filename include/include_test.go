package include_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

const convSrc = `#include "kittens.cuh"
extern "C" __global__ void convert(const float* in, u16* bf, u16* h, u8* e4, u8* e5, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  bf16 b = from_float<bf16>(x); f16 f = from_float<f16>(x);
  fp8e4m3 a = from_float<fp8e4m3>(x); fp8e5m2 c = from_float<fp8e5m2>(x);
  bf[i] = b.bits; h[i] = f.bits; e4[i] = a.bits; e5[i] = c.bits;
  back[4 * i] = to_float(b); back[4 * i + 1] = to_float(f);
  back[4 * i + 2] = to_float(a); back[4 * i + 3] = to_float(c);
}
extern "C" __global__ void reduce(const float* in, float* out) {
  __shared__ float scratch[32];
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  float s = block_sum(v, scratch), m = block_max(v, scratch);
  float g = group_sum<8>(v);
  if (threadIdx.x == 0) { out[3 * blockIdx.x] = s; out[3 * blockIdx.x + 1] = m; out[3 * blockIdx.x + 2] = g; }
}
`

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestDeviceConversionsMatchHost checks every conversion in kittens.cuh bit
// for bit against the tensor package's encoders, on random and special values.
func TestDeviceConversionsMatchHost(t *testing.T) {
	dev := gputest.Device(t)
	fn, err := jit.Get(dev, jit.Kernel{File: "include_test.cu", Source: convSrc, Entry: "convert"})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 448, 449, 464, 480, 500, -500, 57344, 60000, 65504, 65520, 1e-8, 1e-40,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1 + 1.0/256, 1 + 3.0/256, 3.4e38}
	for len(vals) < 1<<16 {
		e := rng.IntN(60) - 30
		vals = append(vals, float32(rng.NormFloat64()*math.Ldexp(1, e)))
	}
	n := len(vals)
	in := make([]byte, 4*n)
	for i, v := range vals {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(v))
	}
	bufs := make([]cuda.DevicePtr, 6)
	sizes := []int{4 * n, 2 * n, 2 * n, n, n, 16 * n}
	for i := range bufs {
		bufs[i], _ = dev.Alloc(sizes[i])
		defer dev.Free(bufs[i])
	}
	dev.CopyHtoD(bufs[0], in)
	a := cuda.NewArgs()
	for _, b := range bufs {
		a.Ptr(b)
	}
	if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1((n + 255) / 256), Block: cuda.D1(256)}, a.I32(int32(n))); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, 6)
	for i := 1; i < 6; i++ {
		out[i] = make([]byte, sizes[i])
		if err := dev.CopyDtoH(out[i], bufs[i]); err != nil {
			t.Fatal(err)
		}
	}
	back := f32s(out[5])
	bad := 0
	for i, v := range vals {
		x := float64(v)
		checks := []struct {
			name      string
			got, want uint32
			gotV      float32
			wantV     float64
		}{
			{"bf16", uint32(binary.LittleEndian.Uint16(out[1][2*i:])), uint32(tensor.BF16Bits(x)), back[4*i], tensor.Round(tensor.BF16, x)},
			{"f16", uint32(binary.LittleEndian.Uint16(out[2][2*i:])), uint32(tensor.F16Bits(x)), back[4*i+1], tensor.Round(tensor.F16, x)},
			{"e4m3", uint32(out[3][i]), uint32(tensor.F8E4M3Bits(x)), back[4*i+2], tensor.Round(tensor.F8E4M3, x)},
			{"e5m2", uint32(out[4][i]), uint32(tensor.F8E5M2Bits(x)), back[4*i+3], tensor.Round(tensor.F8E5M2, x)},
		}
		for _, c := range checks {
			if c.got != c.want || float64(c.gotV) != c.wantV {
				if bad < 10 {
					t.Errorf("%s(%g): device %#x → %g, host %#x → %g", c.name, v, c.got, c.gotV, c.want, c.wantV)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d mismatches", bad)
	}
}

func TestDeviceReductions(t *testing.T) {
	dev := gputest.Device(t)
	fn, err := jit.Get(dev, jit.Kernel{File: "include_test.cu", Source: convSrc, Entry: "reduce"})
	if err != nil {
		t.Fatal(err)
	}
	const blocks, threads = 3, 96
	in := make([]byte, 4*blocks*threads)
	for i := range blocks * threads {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(i%97)-40))
	}
	din, _ := dev.Alloc(len(in))
	dout, _ := dev.Alloc(4 * 3 * blocks)
	defer dev.Free(din)
	defer dev.Free(dout)
	dev.CopyHtoD(din, in)
	if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(blocks), Block: cuda.D1(threads)}, cuda.NewArgs().Ptr(din).Ptr(dout)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*3*blocks)
	dev.CopyDtoH(got, dout)
	vals, res := f32s(in), f32s(got)
	for b := range blocks {
		var sum, mx, g float32 = 0, float32(math.Inf(-1)), 0
		for i := range threads {
			v := vals[b*threads+i]
			sum += v
			mx = max(mx, v)
			if i < 8 {
				g += v
			}
		}
		if res[3*b] != sum || res[3*b+1] != mx || res[3*b+2] != g {
			t.Fatalf("block %d: sum %v max %v group %v, want %v %v %v", b, res[3*b], res[3*b+1], res[3*b+2], sum, mx, g)
		}
	}
}
