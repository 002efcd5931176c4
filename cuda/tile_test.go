package cuda_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/include"
	"github.com/gokittens/kittens/internal/gputest"
)

// tileSrc exercises the shared headers' cluster and TMA helpers.
const tileSrc = `
#include "tile.cuh"
// Each block of a 2-block cluster reads its peer's shared value over DSMEM.
extern "C" __global__ void cluster_ids(u32* out) {
  __shared__ float v;
  if (threadIdx.x == 0) v = (float)blockIdx.x;
  cluster_sync();
  u32 r = cluster_ctarank(), n = cluster_nctarank();
  float peer = dsmem_load_f32(&v, (r + 1) % n);
  if (threadIdx.x == 0) { out[blockIdx.x * 3] = r; out[blockIdx.x * 3 + 1] = n; out[blockIdx.x * 3 + 2] = (u32)peer; }
  cluster_sync();  // keep v alive until the peer has read it
}
// Each block TMA-loads a 32x16 box of a [rows, cols] f32 tensor and writes it
// to a padded output of width ow.
extern "C" __global__ void tma_box(const __grid_constant__ TensorMap map, float* out, int ow) {
  __shared__ __align__(128) float tile[16][32];
  __shared__ __align__(8) u64 bar;
  if (threadIdx.x == 0) mbar_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect_tx(&bar, sizeof(tile));
    tma_load_2d(tile, &map, &bar, blockIdx.x * 32, blockIdx.y * 16);
  }
  mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x)
    out[(blockIdx.y * 16 + i / 32) * ow + blockIdx.x * 32 + i % 32] = tile[i / 32][i % 32];
}
`

func tileModule(t *testing.T, d *cuda.Device) *cuda.Module {
	cubin, err := cuda.CompileCUBIN("tile_test.cu", tileSrc, include.Headers(), []string{"-arch=" + d.Props().Arch(), "-std=c++17"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.LoadModule(cubin)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestClusterLaunch(t *testing.T) {
	d := gputest.Device(t)
	m := tileModule(t, d)
	defer m.Unload()
	fn, err := m.Function("cluster_ids")
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 8
	out, _ := d.Alloc(4 * 3 * blocks)
	defer d.Free(out)
	if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(blocks), Block: cuda.D1(64), Cluster: cuda.D1(2)}, cuda.NewArgs().Ptr(out)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*3*blocks)
	if err := d.CopyDtoH(got, out); err != nil {
		t.Fatal(err)
	}
	for b := range blocks {
		r := binary.LittleEndian.Uint32(got[12*b:])
		n := binary.LittleEndian.Uint32(got[12*b+4:])
		peer := binary.LittleEndian.Uint32(got[12*b+8:])
		if r != uint32(b%2) || n != 2 || peer != uint32(b^1) {
			t.Fatalf("block %d: rank %d of %d, peer value %d", b, r, n, peer)
		}
	}
}

func TestTMATileLoad(t *testing.T) {
	d := gputest.Device(t)
	m := tileModule(t, d)
	defer m.Unload()
	fn, err := m.Function("tma_box")
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = 40, 100 // not multiples of the box: the TMA fills zeros outside
	const gx, gy = (cols + 31) / 32, (rows + 15) / 16
	const ow, oh = gx * 32, gy * 16
	host := make([]byte, 4*rows*cols)
	for i := range rows * cols {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(i)+0.5))
	}
	in, _ := d.Alloc(len(host))
	defer d.Free(in)
	d.CopyHtoD(in, host)
	out, _ := d.Alloc(4 * ow * oh)
	defer d.Free(out)
	tm, err := cuda.EncodeTiled(cuda.TiledMap{Type: cuda.MapFloat32, Addr: in,
		Dims: []uint64{cols, rows}, Strides: []uint64{4 * cols}, Box: []uint32{32, 16}})
	if err != nil {
		t.Fatal(err)
	}
	err = fn.Launch(cuda.LaunchConfig{Grid: cuda.Dim3{X: gx, Y: gy, Z: 1}, Block: cuda.D1(128)}, cuda.NewArgs().Map(tm).Ptr(out).I32(ow))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*ow*oh)
	if err := d.CopyDtoH(got, out); err != nil {
		t.Fatal(err)
	}
	for r := range oh {
		for c := range ow {
			v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*(r*ow+c):]))
			want := float32(0)
			if r < rows && c < cols {
				want = float32(r*cols+c) + 0.5
			}
			if v != want {
				t.Fatalf("(%d,%d) = %v, want %v", r, c, v, want)
			}
		}
	}
}
