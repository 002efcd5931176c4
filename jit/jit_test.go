package jit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/include"
)

func TestCacheRoundTripAndCorruption(t *testing.T) {
	t.Setenv(EnvCacheDir, t.TempDir())
	payload := bytes.Repeat([]byte("cubin"), 1000)
	writeCache("k1", payload)
	got, ok := readCache("k1")
	if !ok || !bytes.Equal(got, payload) {
		t.Fatal("cache round trip failed")
	}
	path := cachePath("k1")
	full, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"truncated":   full[:len(full)-7],
		"flipped":     append(append([]byte(nil), full[:len(full)-1]...), full[len(full)-1]^1),
		"bad magic":   append([]byte("XXXXXXX"), full[7:]...),
		"header only": full[:len(magic)+10],
		"empty":       {},
	} {
		os.WriteFile(path, bad, 0o644)
		if _, ok := readCache("k1"); ok {
			t.Errorf("%s entry accepted", name)
		}
	}
	entries, _ := filepath.Glob(filepath.Join(CacheDir(), "*.tmp*"))
	if len(entries) != 0 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestKeyCoversEverything(t *testing.T) {
	k := Kernel{File: "a.cu", Source: "x", Entry: "e", Defines: []string{"DTYPE=float"}}
	base := Key(k, "sm_90a", "13.0")
	variants := map[string]string{
		"source":  Key(Kernel{File: "a.cu", Source: "y", Entry: "e", Defines: k.Defines}, "sm_90a", "13.0"),
		"defines": Key(Kernel{File: "a.cu", Source: "x", Entry: "e", Defines: []string{"DTYPE=bf16"}}, "sm_90a", "13.0"),
		"arch":    Key(k, "sm_80", "13.0"),
		"nvrtc":   Key(k, "sm_90a", "12.8"),
	}
	for what, v := range variants {
		if v == base {
			t.Errorf("key ignores the %s", what)
		}
	}
	if Key(k, "sm_90a", "13.0") != base {
		t.Error("key is not deterministic")
	}
	if len(include.Headers()) == 0 {
		t.Error("no shared headers embedded")
	}
}

func TestDefinesSorted(t *testing.T) {
	got := Defines(map[string]any{"VEC": 8, "T": "bf16", "BLOCK": 256})
	want := []string{"BLOCK=256", "T=bf16", "VEC=8"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v", got)
	}
}

func gpu(t *testing.T) *cuda.Device {
	d, err := cuda.Default()
	if err != nil {
		if os.Getenv("KITTENS_REQUIRE_GPU") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return d
}

const testSrc = `#include "kittens.cuh"
extern "C" __global__ void conv(const DTYPE* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = to_float(in[i]) + OFFSET;
}`

// TestCompileDiskCacheAndRebuild compiles a kernel, finds it on disk, and
// rebuilds it after the entry is damaged.
func TestCompileDiskCacheAndRebuild(t *testing.T) {
	dev := gpu(t)
	t.Setenv(EnvCacheDir, t.TempDir())
	k := Kernel{File: "test.cu", Source: testSrc, Entry: "conv", Defines: []string{"DTYPE=bf16", "OFFSET=1.0f"}}
	before := Compiles()
	if _, err := Get(dev, k); err != nil {
		t.Fatal(err)
	}
	if Compiles() != before+1 {
		t.Fatal("first build did not compile")
	}
	files, _ := filepath.Glob(filepath.Join(CacheDir(), "*.cubin"))
	if len(files) != 1 {
		t.Fatalf("want one cache entry, got %v", files)
	}
	// A fresh process would miss the memo: build directly from disk.
	if _, err := build(dev, k); err != nil || Compiles() != before+1 {
		t.Fatalf("disk hit recompiled or failed: %v", err)
	}
	os.WriteFile(files[0], []byte("KITTENS-CUBIN-1\ngarbage"), 0o644)
	fn, err := build(dev, k)
	if err != nil || Compiles() != before+2 {
		t.Fatalf("damaged entry not rebuilt: %v (compiles %d)", err, Compiles()-before)
	}
	// The rebuilt kernel runs: bf16 1.5 (0x3fc0) + 1 = 2.5.
	in, _ := dev.Alloc(2)
	out, _ := dev.Alloc(4)
	defer dev.Free(in)
	defer dev.Free(out)
	dev.CopyHtoD(in, []byte{0xc0, 0x3f})
	if err := fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(32)}, cuda.NewArgs().Ptr(in).Ptr(out).I32(1)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	dev.CopyDtoH(got, out)
	if !bytes.Equal(got, []byte{0, 0, 0x20, 0x40}) {
		t.Fatalf("kernel wrote % x, want 2.5", got)
	}
	if _, err := Get(dev, Kernel{File: "broken.cu", Source: "syntax error here", Entry: "x"}); err == nil {
		t.Fatal("broken source compiled")
	}
}

// TestPrepareParallel compiles several specializations at once.
func TestPrepareParallel(t *testing.T) {
	dev := gpu(t)
	t.Setenv(EnvCacheDir, t.TempDir())
	var ks []Kernel
	for i, ty := range []string{"float", "bf16", "f16", "fp8e4m3", "fp8e5m2"} {
		ks = append(ks, Kernel{File: "test.cu", Source: testSrc, Entry: "conv", Defines: []string{"DTYPE=" + ty, fmt.Sprintf("OFFSET=%d.0f", i+10)}})
	}
	if err := Prepare(dev, ks); err != nil {
		t.Fatal(err)
	}
	var f Funcs[int]
	f.Kernel = func(i int) Kernel { return ks[i] }
	fn1, err := f.Get(dev, 2)
	fn2, _ := f.Get(dev, 2)
	if err != nil || fn1 != fn2 {
		t.Fatal("Funcs does not memoize")
	}
	if a := testing.AllocsPerRun(100, func() { f.Get(dev, 2) }); a != 0 {
		t.Fatalf("Funcs.Get allocates %v", a)
	}
}

func TestDefineNamesChecked(t *testing.T) {
	for _, bad := range []string{"T=float", "N=4", "vec=8", "Ab=1"} {
		if _, err := source(Kernel{File: "x.cu", Defines: []string{bad}}); err == nil {
			t.Errorf("define %q accepted", bad)
		}
	}
	src, err := source(Kernel{File: "x.cu", Source: "body", Defines: []string{"DTYPE=bf16", "VEC=8"}})
	if err != nil || src != "#define DTYPE bf16\n#define VEC 8\n#line 1 \"x.cu\"\nbody" {
		t.Fatalf("got %q, %v", src, err)
	}
}

// TestResources compiles, with NVRTC alone, a kernel that keeps an array it
// indexes at run time (a stack frame) and one that does not, and reads both
// back. Skipped where no NVRTC is found.
func TestResources(t *testing.T) {
	if _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		src      string
		useFrame bool
	}{
		{`extern "C" __global__ void k(float* y, int i) { y[threadIdx.x] = 2.f * y[threadIdx.x] + i; }`, false},
		{`extern "C" __global__ void k(float* y, int i) {
			float a[64];
			for (int j = 0; j < 64; ++j) a[(j * i) & 63] = y[j * blockDim.x + threadIdx.x];
			y[threadIdx.x] = a[i & 63];
		}`, true},
	} {
		bin, err := Compile("sm_80", Kernel{File: "resources.cu", Source: tc.src, Entry: "k"})
		if err != nil {
			t.Fatal(err)
		}
		regs, frame, err := Resources(bin)
		if err != nil {
			t.Fatal(err)
		}
		if regs <= 0 || (frame > 0) != tc.useFrame {
			t.Errorf("%d registers, %d-byte frame; want a frame: %v", regs, frame, tc.useFrame)
		}
		t.Logf("%d registers, %d-byte frame", regs, frame)
	}
	if _, _, err := Resources([]byte("not an ELF file at all, but long enough to be read as one......")); err == nil {
		t.Error("Resources accepted a non-CUBIN")
	}
}
