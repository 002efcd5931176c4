package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/include"
	"github.com/gokittens/kittens/tensor"
)

func TestCacheRoundTripAndCorruption(t *testing.T) {
	t.Setenv(EnvCacheDir, t.TempDir())
	payload := bytes.Repeat([]byte("cubin"), 1000)
	writeCache("k1", payload)
	got, ok := readCache("k1")
	if !ok || !bytes.Equal(got, payload) {
		t.Fatal("cache round trip failed")
	}
	path := cachePath(CacheDir(), "k1")
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

// TestNoSharedCacheDir: without $KITTENS_CACHE_DIR and a user cache dir the
// disk cache is off. It must not fall back to a folder every user can write
// to, where a CUBIN planted under a kernel's key would be loaded.
func TestNoSharedCacheDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv(EnvCacheDir, "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	t.Setenv("TMPDIR", tmp)
	if d := CacheDir(); d != "" {
		t.Fatalf("CacheDir = %q, want the cache off", d)
	}
	planted := filepath.Join(tmp, "kittens", "k1.cubin")
	os.MkdirAll(filepath.Dir(planted), 0o755)
	body := []byte("someone else's CUBIN")
	sum := sha256.Sum256(body)
	os.WriteFile(planted, append(append(append([]byte(nil), magic...), sum[:]...), body...), 0o644)
	if got, ok := readCache("k1"); ok {
		t.Fatalf("loaded %q with the cache off", got)
	}
	writeCache("k2", body) // nowhere to go: dropped
	if files, _ := filepath.Glob(filepath.Join(tmp, "*", "k2*")); len(files) != 0 {
		t.Errorf("wrote %v with the cache off", files)
	}
}

func TestKeyCoversEverything(t *testing.T) {
	k := Kernel{File: "a.cu", Source: "x", Entry: "e", Defines: []string{"DTYPE=float"}}
	base := Key(k, "sm_90a", "13.0")
	variants := map[string]string{
		"file":      Key(Kernel{File: "b.cu", Source: "x", Entry: "e", Defines: k.Defines}, "sm_90a", "13.0"),
		"source":    Key(Kernel{File: "a.cu", Source: "y", Entry: "e", Defines: k.Defines}, "sm_90a", "13.0"),
		"defines":   Key(Kernel{File: "a.cu", Source: "x", Entry: "e", Defines: []string{"DTYPE=bf16"}}, "sm_90a", "13.0"),
		"arch":      Key(k, "sm_80", "13.0"),
		"nvrtc":     Key(k, "sm_90a", "12.8"),
		"dependent": Key(Kernel{File: "a.cu", Source: "x", Entry: "e", Defines: k.Defines, Dependent: true}, "sm_90a", "13.0"),
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
	got := Defines(map[string]any{"VEC": 8, "TTT": "bf16", "BLOCK": 256, "FULL": true, "EARLY": false, "DTYPE": tensor.F32})
	want := []string{"BLOCK=256", "DTYPE=float", "EARLY=0", "FULL=1", "TTT=bf16", "VEC=8"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v", got)
	}
}

// TestMemoRetriesFailedBuild: callers that arrive during a build wait for
// it and share its result, a failed build is not memoized, and a
// successful one is.
func TestMemoRetriesFailedBuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m buildMemo
		key := memoKey{k: "kernel"}
		release := make(chan struct{})
		builds := 0 // only one build runs at a time, or the race detector objects
		failing := func() (*cuda.Function, error) {
			builds++
			<-release
			return nil, errors.New("transient failure")
		}
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = m.get(key, failing) })
			synctest.Wait() // the first caller is building, the others wait for it
		}
		close(release)
		wg.Wait()
		if builds != 1 {
			t.Fatalf("%d builds for 4 concurrent callers, want 1", builds)
		}
		for i, err := range errs {
			if err == nil || err.Error() != "transient failure" {
				t.Errorf("caller %d: error %v, want the build's", i, err)
			}
		}
		want := &cuda.Function{Name: "kernel"}
		fn, err := m.get(key, func() (*cuda.Function, error) { builds++; return want, nil })
		if fn != want || err != nil || builds != 2 {
			t.Fatalf("after a failed build: %v, %v, %d builds; want a new build", fn, err, builds)
		}
		fn, err = m.get(key, func() (*cuda.Function, error) { builds++; return nil, errors.New("rebuilt") })
		if fn != want || err != nil || builds != 2 {
			t.Fatalf("after a good build: %v, %v, %d builds; want the memoized function", fn, err, builds)
		}
	})
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
	fn1, err := f.Get(dev, nil, 2)
	fn2, _ := f.Get(dev, nil, 2)
	if err != nil || fn1 != fn2 {
		t.Fatal("Funcs does not memoize")
	}
	if a := testing.AllocsPerRun(100, func() { f.Get(dev, nil, 2) }); a != 0 {
		t.Fatalf("Funcs.Get allocates %v", a)
	}
}

// TestDependentBuildNeedsNVRTC12: an NVRTC before 12 gets an error for a
// build for dependent launches instead of compiling it (11.8 crashes the
// process on griddepcontrol). Skipped without NVRTC, or with a newer one.
func TestDependentBuildNeedsNVRTC12(t *testing.T) {
	ma, _, err := cuda.NVRTCVersion()
	if err != nil || ma >= 12 {
		t.Skipf("NVRTC %d (%v): needs one before 12", ma, err)
	}
	t.Setenv(EnvCacheDir, t.TempDir())
	k := Kernel{File: "x.cu", Entry: "k", Dependent: true, Source: `#include "kittens.cuh"
extern "C" __global__ void k(float* p) { wait_prior_grids(); p[threadIdx.x] += 1.f; }`}
	if _, err := Compile("sm_90", k); err == nil || !strings.Contains(err.Error(), "need NVRTC 12") {
		t.Fatalf("got %v", err)
	}
}

// TestFuncsForDependentStreams: a stream set for dependent launches gets its
// own build of a specialization, one that allows them, and other streams the
// plain one.
func TestFuncsForDependentStreams(t *testing.T) {
	dev := gpu(t)
	if !dev.Props().DependentLaunch() {
		t.Skip("dependent launches need compute capability 9.0")
	}
	t.Setenv(EnvCacheDir, t.TempDir())
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.SetDependentLaunch(true); err != nil {
		t.Fatal(err)
	}
	f := Funcs[int]{Kernel: func(int) Kernel {
		return Kernel{File: "test.cu", Source: testSrc, Entry: "conv", Defines: []string{"DTYPE=float", "OFFSET=1.0f"}}
	}}
	plain, err := f.Get(dev, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dependent, err := f.Get(dev, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plain == dependent {
		t.Fatal("one build serves plain and dependent streams")
	}
	if again, _ := f.Get(dev, s, 0); again != dependent {
		t.Error("Funcs does not memoize the dependent build")
	}
	if plain.DependentLaunchAllowed() || !dependent.DependentLaunchAllowed() {
		t.Errorf("dependent launches allowed: plain %v, dependent build %v", plain.DependentLaunchAllowed(), dependent.DependentLaunchAllowed())
	}
	if a := testing.AllocsPerRun(100, func() { f.Get(dev, s, 0) }); a != 0 {
		t.Fatalf("Funcs.Get allocates %v", a)
	}
}

func TestDefineNamesChecked(t *testing.T) {
	for _, bad := range []string{"T=float", "N=4", "vec=8", "Ab=1", "KITTENS_PDL=1"} {
		if _, err := source(Kernel{File: "x.cu", Defines: []string{bad}}); err == nil {
			t.Errorf("define %q accepted", bad)
		}
	}
	src, err := source(Kernel{File: "x.cu", Source: "body", Defines: []string{"DTYPE=bf16", "VEC=8"}})
	if err != nil || src != "#define DTYPE bf16\n#define VEC 8\n#line 1 \"x.cu\"\nbody" {
		t.Fatalf("got %q, %v", src, err)
	}
	src, err = source(Kernel{File: "x.cu", Source: "body", Dependent: true})
	if err != nil || src != "#define KITTENS_PDL 1\n#line 1 \"x.cu\"\nbody" {
		t.Fatalf("dependent: got %q, %v", src, err)
	}
}

// TestResources compiles, with NVRTC alone, a kernel that keeps an array it
// indexes at run time (a stack frame) and one that does not, and reads both
// back. Skipped where no NVRTC is found.
func TestResources(t *testing.T) {
	if _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Skip(err)
	}
	t.Setenv(EnvCacheDir, t.TempDir()) // compile afresh, and leave the user's cache alone
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

// testCUBIN returns a minimal CUBIN-like ELF: a 64-byte header; a name
// table and a .nv.info.k section that records 40 registers and a 16-byte
// frame (and one record of another format); then three section headers
// (null, name table, .nv.info.k) at offset 114.
func testCUBIN() []byte {
	le := binary.LittleEndian
	b := make([]byte, 64)
	copy(b, "\x7fELF")
	names := "\x00.shstrtab\x00.nv.info.k\x00" // names at offsets 1 and 11
	b = append(b, names...)
	info := []byte{4, 0x2f, 8, 0, 0, 0, 0, 0, 40, 0, 0, 0, 3, 0x12, 0x34, 0x12, 4, 0x11, 8, 0, 0, 0, 0, 0, 16, 0, 0, 0}
	b = append(b, info...)
	le.PutUint64(b[0x28:], uint64(len(b)))
	le.PutUint16(b[0x3c:], 3)
	le.PutUint16(b[0x3e:], 1)
	for _, s := range []struct {
		name      uint32
		off, size int
	}{{0, 0, 0}, {1, 64, len(names)}, {11, 64 + len(names), len(info)}} {
		h := make([]byte, 64)
		le.PutUint32(h, s.name)
		le.PutUint64(h[24:], uint64(s.off))
		le.PutUint64(h[32:], uint64(s.size))
		b = append(b, h...)
	}
	return b
}

// TestResourcesMalformed reads a synthetic CUBIN, then damaged copies of
// it, each of which must give an error, not a panic.
func TestResourcesMalformed(t *testing.T) {
	if regs, frame, err := Resources(testCUBIN()); err != nil || regs != 40 || frame != 16 {
		t.Fatalf("synthetic CUBIN: %d registers, %d-byte frame, %v; want 40, 16", regs, frame, err)
	}
	le := binary.LittleEndian
	const shoff, sec1, sec2 = 114, 114 + 64, 114 + 128 // section headers
	// The 192-byte ELF: a header and two section headers, the second the
	// name table, which claims to lie at offset 1 MiB.
	short := make([]byte, 192)
	copy(short, "\x7fELF")
	le.PutUint64(short[0x28:], 64)
	le.PutUint16(short[0x3c:], 2)
	le.PutUint16(short[0x3e:], 1)
	le.PutUint64(short[128+24:], 1<<20)
	le.PutUint64(short[128+32:], 16)
	cases := map[string][]byte{"name table at 1 MiB": short}
	for name, damage := range map[string]func(b []byte){
		"headers past the end":        func(b []byte) { le.PutUint64(b[0x28:], uint64(len(b)-1)) },
		"headers offset overflows":    func(b []byte) { le.PutUint64(b[0x28:], 1<<64-64) },
		"too many headers":            func(b []byte) { le.PutUint16(b[0x3c:], 4) },
		"name table index":            func(b []byte) { le.PutUint16(b[0x3e:], 3) },
		"name table past the end":     func(b []byte) { le.PutUint64(b[sec1+24:], 1<<20) },
		"name table size overflows":   func(b []byte) { le.PutUint64(b[sec1+32:], 1<<64-1) },
		"name past the name table":    func(b []byte) { le.PutUint32(b[sec2:], 1000) },
		"name offset at the end":      func(b []byte) { le.PutUint32(b[sec2:], 22) },
		"info past the end":           func(b []byte) { le.PutUint64(b[sec2+32:], 1<<20) },
		"info offset overflows":       func(b []byte) { le.PutUint64(b[sec2+24:], 1<<64-1); le.PutUint64(b[sec2+32:], 2) },
		"info size overflows":         func(b []byte) { le.PutUint64(b[sec2+32:], 1<<64-8) },
		"section headers cut short":   func(b []byte) { le.PutUint64(b[0x28:], shoff+1) },
		"name table index overflows":  func(b []byte) { le.PutUint16(b[0x3e:], 0xffff) },
		"header count and offset max": func(b []byte) { le.PutUint64(b[0x28:], 1<<64-1); le.PutUint16(b[0x3c:], 0xffff) },
	} {
		b := testCUBIN()
		damage(b)
		cases[name] = b
	}
	cases["truncated"] = testCUBIN()[:200]
	cases["header only"] = testCUBIN()[:64]
	for name, b := range cases {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic: %v", name, r)
				}
			}()
			if _, _, err := Resources(b); err == nil || !strings.HasPrefix(err.Error(), "jit: ") {
				t.Errorf("%s: error %v", name, err)
			}
		}()
	}
}

// TestPrepareReportsProgress: Prepare reports each finished kernel to the
// function SetProgress set, with done counting up to the batch's size, one
// call at a time even while two batches build at once; with nil set it
// reports nothing. The kernels fail before any compile (a bad define), so
// no GPU or NVRTC is needed; the device is a stand-in never handed to the
// driver.
func TestPrepareReportsProgress(t *testing.T) {
	t.Setenv(EnvCacheDir, t.TempDir())
	batch := func(n int) []Kernel {
		ks := make([]Kernel, n)
		for i := range ks {
			ks[i] = Kernel{File: "progress.cu", Entry: "k", Defines: []string{fmt.Sprintf("bad%d=%d", n, i)}}
		}
		return ks
	}
	var (
		inside atomic.Int32
		seen   = map[int][]int{} // total: the done values reported, in order
	)
	SetProgress(func(done, total int) {
		if inside.Add(1) != 1 {
			t.Error("progress reported from two goroutines at once")
		}
		time.Sleep(100 * time.Microsecond) // widen the window for an overlap
		seen[total] = append(seen[total], done)
		inside.Add(-1)
	})
	defer SetProgress(nil)
	dev := &cuda.Device{}
	var wg sync.WaitGroup
	for _, n := range []int{7, 13} {
		wg.Go(func() {
			if err := Prepare(dev, batch(n)); err == nil {
				t.Errorf("batch of %d: no error from kernels that cannot build", n)
			}
		})
	}
	wg.Wait()
	for _, n := range []int{7, 13} {
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(seen[n], want) {
			t.Errorf("batch of %d reported done %v, want %v", n, seen[n], want)
		}
	}
	SetProgress(nil)
	clear(seen)
	Prepare(dev, batch(3))
	if len(seen) != 0 {
		t.Errorf("reported %v with no progress function set", seen)
	}
}

// TestNilDevice: a nil device (an unchecked cuda.Default) is an error
// from Get, Funcs.Get and Prepare, before anything is built.
func TestNilDevice(t *testing.T) {
	k := Kernel{File: "x.cu", Source: "body", Entry: "k"}
	_, err := Get(nil, k)
	if !errors.Is(err, cuda.ErrNilDevice) {
		t.Errorf("Get: error %v, want cuda.ErrNilDevice", err)
	}
	f := Funcs[int]{Kernel: func(int) Kernel { return k }}
	if _, err := f.Get(nil, nil, 0); !errors.Is(err, cuda.ErrNilDevice) {
		t.Errorf("Funcs.Get: error %v, want cuda.ErrNilDevice", err)
	}
	calls := 0
	SetProgress(func(int, int) { calls++ })
	defer SetProgress(nil)
	if err := Prepare(nil, []Kernel{k}); !errors.Is(err, cuda.ErrNilDevice) || calls != 0 {
		t.Errorf("Prepare: error %v after %d reports, want cuda.ErrNilDevice and none", err, calls)
	}
}
