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

// vecSrc copies bf16, f16 and f32 data through every width and cache hint of
// Vec's load and store, widening each element (get) and rounding it back
// (pack).
const vecSrc = `#include "kittens.cuh"
template <class T, int N, Cache LH, Cache SH> KI void pass(const T* x, T* y, float* f, int i) {
  using V = Vec<T, N>;
  const V v = load<V, LH>(x + i * N);
  float w[N];
  unpack(v, w);
  for (int k = 0; k < N; ++k) f[i * N + k] = v.get(k) == w[k] && to_float(v.at(k)) == w[k] ? w[k] : knan();
  store<SH>(y + i * N, pack<V>(w));
}
// Thread i of the grid moves element group i of each width; n is 16 elements
// a thread (the widest group of bf16 and f16, four of f32).
extern "C" __global__ void vec_pass(const bf16* xb, bf16* yb, float* fb, const f16* xh, f16* yh, float* fh,
                                   const float* xf, float* yf, float* ff, int groups, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  switch (width) {
    case 1: pass<bf16, 1, Cache::plain, Cache::stream>(xb, yb, fb, i); pass<f16, 1, Cache::stream, Cache::stream>(xh, yh, fh, i);
            pass<float, 1, Cache::nc, Cache::plain>(xf, yf, ff, i); break;
    case 2: pass<bf16, 2, Cache::last, Cache::stream>(xb, yb, fb, i); pass<f16, 2, Cache::nc, Cache::plain>(xh, yh, fh, i);
            pass<float, 2, Cache::stream, Cache::stream>(xf, yf, ff, i); break;
    case 4: pass<bf16, 4, Cache::nc, Cache::stream>(xb, yb, fb, i); pass<f16, 4, Cache::last, Cache::plain>(xh, yh, fh, i);
            pass<float, 4, Cache::last, Cache::stream>(xf, yf, ff, i); break;
    default: pass<bf16, 8, Cache::stream, Cache::plain>(xb, yb, fb, i); pass<f16, 8, Cache::last, Cache::stream>(xh, yh, fh, i);
             pass<float, 4, Cache::plain, Cache::plain>(xf, yf, ff, i); break;
  }
}
`

// TestDeviceVec checks that every width and hint of Vec's loads and stores
// moves the bytes unchanged, and that get, at, unpack and pack agree with
// the element conversions.
func TestDeviceVec(t *testing.T) {
	dev := gputest.Device(t)
	fn, err := jit.Get(dev, jit.Kernel{File: "include_test.cu", Source: vecSrc, Entry: "vec_pass"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096 // elements of each dtype
	rng := rand.New(rand.NewPCG(3, 4))
	x := [3][]byte{make([]byte, 2*n), make([]byte, 2*n), make([]byte, 4*n)}
	want := [3][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		v := rng.NormFloat64() * 100
		binary.LittleEndian.PutUint16(x[0][2*i:], tensor.BF16Bits(v))
		binary.LittleEndian.PutUint16(x[1][2*i:], tensor.F16Bits(v))
		binary.LittleEndian.PutUint32(x[2][4*i:], math.Float32bits(float32(v)))
		want[0][i], want[1][i], want[2][i] = float32(tensor.Round(tensor.BF16, v)), float32(tensor.Round(tensor.F16, v)), float32(v)
	}
	var bufs [9]cuda.DevicePtr
	for d := range 3 {
		for k := range 3 {
			size := len(x[d])
			if k == 2 {
				size = 4 * n
			}
			if bufs[3*d+k], err = dev.Alloc(size); err != nil {
				t.Fatal(err)
			}
			defer dev.Free(bufs[3*d+k])
		}
		if err := dev.CopyHtoD(bufs[3*d], x[d]); err != nil {
			t.Fatal(err)
		}
	}
	for _, width := range []int{1, 2, 4, 8} {
		// f32 moves 4 elements at width 8, so its groups cover the first half.
		groups := n / width
		a := cuda.NewArgs()
		for _, b := range bufs {
			a.Ptr(b)
		}
		if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1((groups + 127) / 128), Block: cuda.D1(128)}, a.I32(int32(groups)).I32(int32(width))); err != nil {
			t.Fatal(err)
		}
		for d, name := range []string{"bf16", "f16", "f32"} {
			covered := n
			if d == 2 && width == 8 {
				covered = n / 2
			}
			y, f := make([]byte, len(x[d])), make([]byte, 4*n)
			if err := dev.CopyDtoH(y, bufs[3*d+1]); err != nil {
				t.Fatal(err)
			}
			if err := dev.CopyDtoH(f, bufs[3*d+2]); err != nil {
				t.Fatal(err)
			}
			es := len(x[d]) / n
			if string(y[:covered*es]) != string(x[d][:covered*es]) {
				t.Errorf("width %d %s: the stored bytes differ from the loaded ones", width, name)
			}
			for i, v := range f32s(f)[:covered] {
				if v != want[d][i] {
					t.Fatalf("width %d %s: element %d widened to %v, want %v", width, name, i, v, want[d][i])
				}
			}
		}
	}
}

// ringSrc streams n pieces of 64 floats through a 3-slot Ring (tile.cuh):
// the last warp's lane 0 bulk-copies them in, the other warps sum each piece
// (lane j its floats j and j + 32) and release it, and warp 0 writes the
// sums; piece g lands in slot g mod 3, so the ring laps many times.
const ringSrc = `#include "tile.cuh"
extern "C" __global__ void ring_sums(const float* x, float* sums, int n) {
  __shared__ __align__(128) float slot[3][64];
  __shared__ __align__(8) u64 full[3], empty[3];
  const Ring ring{full, empty, 3};
  const int consumers = blockDim.x / 32 - 1;
  if (threadIdx.x == 0) ring.init(consumers);
  __syncthreads();
  if ((int)threadIdx.x >= 32 * consumers) {
    if ((int)threadIdx.x == 32 * consumers) {
      RingPos pos;
      for (int g = 0; g < n; ++g) {
        ring.acquire(pos);
        bulk_load<Cache::last>(slot[pos.slot], x + 64 * g, 256, ring.commit(pos.slot, 256));
        pos.next(ring.slots);
      }
    }
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  RingPos pos;
  for (int g = 0; g < n; ++g) {
    ring.wait(pos);
    const float s = warp_sum(slot[pos.slot][lane] + slot[pos.slot][lane + 32]);
    if (warp == 0 && lane == 0) sums[g] = s;
    ring.release(pos.slot);
    pos.next(ring.slots);
  }
}
`

// TestDeviceRing checks the Ring's phase tracking over many laps, with
// several consumer warps and a producer that waits for each free slot.
func TestDeviceRing(t *testing.T) {
	dev := gputest.Device(t)
	if dev.Props().Major < 9 {
		t.Skip("bulk copies need compute capability 9.0")
	}
	fn, err := jit.Get(dev, jit.Kernel{File: "include_test.cu", Source: ringSrc, Entry: "ring_sums"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	in := make([]byte, 4*64*n)
	for i := range 64 * n {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(i%61)))
	}
	din, _ := dev.Alloc(len(in))
	dout, _ := dev.Alloc(4 * n)
	defer dev.Free(din)
	defer dev.Free(dout)
	if err := dev.CopyHtoD(din, in); err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(96)}, cuda.NewArgs().Ptr(din).Ptr(dout).I32(n)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := dev.CopyDtoH(got, dout); err != nil {
		t.Fatal(err)
	}
	vals := f32s(in)
	for g, s := range f32s(got) {
		var want float32
		for _, v := range vals[64*g : 64*g+64] {
			want += v
		}
		if s != want {
			t.Fatalf("piece %d: sum %v, want %v", g, s, want)
		}
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
