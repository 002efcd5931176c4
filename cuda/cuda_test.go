package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// testDevice opens device 0 or skips; KITTENS_REQUIRE_GPU=1 turns the skip
// into a failure. (internal/gputest does the same for other packages; it
// cannot be imported here without a cycle.)
func testDevice(t testing.TB) *Device {
	t.Helper()
	d, err := Default()
	if err != nil {
		if os.Getenv("KITTENS_REQUIRE_GPU") == "1" {
			t.Fatalf("no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return d
}

// TestNoDriverError checks that a machine without a usable GPU gets a clear
// error, and no panic: one naming the missing library where there is no
// driver, one naming the failed call where the driver is installed but
// finds no device (a driver package on a machine without a GPU).
func TestNoDriverError(t *testing.T) {
	err := Init()
	if err == nil {
		t.Skip("a driver is present and found a device")
	}
	var le *LoadError
	var ce *Error
	switch {
	case errors.As(err, &le):
		if !strings.Contains(err.Error(), "libcuda") {
			t.Fatalf("error does not name the library: %v", err)
		}
	case errors.As(err, &ce):
		if !strings.Contains(err.Error(), "cuInit") {
			t.Fatalf("error does not name the failed call: %v", err)
		}
	default:
		t.Fatalf("error is neither a load error nor a driver call's: %T %v", err, err)
	}
	if _, err := Default(); err == nil {
		t.Fatal("Default succeeded without a usable driver")
	}
}

// TestAddressesForCAreOnTheHeap checks that ptr and hostPtr move what they
// point at to the heap. A goroutine's stack is copied elsewhere when it
// grows, and an address already turned into a uintptr is not updated: a C
// function handed the address of a stack variable would write into the old
// stack (newError lost error names that way). A heap object never moves.
func TestAddressesForCAreOnTheHeap(t *testing.T) {
	var out uintptr
	var buf [16]byte
	p, b := ptr(&out), hostPtr(buf[:])
	growStack(1 << 10)
	if p != uintptr(unsafe.Pointer(&out)) || b != uintptr(unsafe.Pointer(&buf[0])) {
		t.Fatal("an address handed to C moved with the goroutine's stack")
	}
}

// growStack uses n frames of 2 KiB or more, which makes the goroutine's
// stack grow and move.
//
//go:noinline
func growStack(n int) int {
	var pad [256]int
	pad[n%len(pad)] = n
	if n == 0 {
		return pad[0]
	}
	return growStack(n-1) + pad[n%len(pad)]
}

// TestWheelNVRTC lays out a CUDA 13 and a CUDA 12 NVRTC wheel, with their
// alt and builtins libraries, in a folder whose name holds "alt", and checks
// that the search finds both NVRTC libraries and nothing else.
func TestWheelNVRTC(t *testing.T) {
	root := filepath.Join(t.TempDir(), "walter", "site-packages")
	for _, f := range []string{
		"nvidia/cu13/lib/libnvrtc.so.13",
		"nvidia/cu13/lib/libnvrtc.alt.so.13",
		"nvidia/cu13/lib/libnvrtc-builtins.so.13.0",
		"nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12",
		"nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.8",
		"nvidia/cuda_nvrtc/lib/libnvrtc-builtins.alt.so.12.8",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := wheelNVRTC([]string{root})
	want := []string{
		filepath.Join(root, "nvidia/cu13/lib/libnvrtc.so.13"),
		filepath.Join(root, "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
}

// TestArch checks the NVRTC target of each compute capability: the
// architecture-specific one from Hopper on.
func TestArch(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		want         string
	}{{7, 5, "sm_75"}, {8, 0, "sm_80"}, {8, 9, "sm_89"}, {9, 0, "sm_90a"}, {10, 0, "sm_100a"}, {12, 0, "sm_120a"}} {
		if got := (Props{Major: c.major, Minor: c.minor}).Arch(); got != c.want {
			t.Errorf("compute capability %d.%d: %s, want %s", c.major, c.minor, got, c.want)
		}
	}
}

func TestDeviceProps(t *testing.T) {
	d := testDevice(t)
	p := d.Props()
	t.Logf("%+v arch %s", p, p.Arch())
	if p.SMs <= 0 || p.Major <= 0 || p.SharedPerBlockOptin < p.SharedPerBlock || p.L2Bytes <= 0 || p.TotalMem <= 0 || p.Name == "" {
		t.Fatalf("implausible properties %+v", p)
	}
	v, err := DriverVersion()
	if err != nil || v < 12000 {
		t.Fatalf("driver version %d, %v", v, err)
	}
	free, total, err := d.MemInfo()
	if err != nil || free <= 0 || total < free {
		t.Fatalf("meminfo %d/%d %v", free, total, err)
	}
	if err := d.ResetPersistingL2(); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	d := testDevice(t)
	const n = 1<<20 + 3
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	a, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(a)
	b, _ := d.Alloc(n)
	defer d.Free(b)
	if err := d.CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyDtoD(b, a, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.CopyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("sync round trip differs")
	}
	s := testStream(t, d)
	if err := s.Memset8(b, 0xAB, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Memset32(b, 0x01020304, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(got) != 0x01020304 || got[16] != 0xAB || got[n-1] != 0xAB {
		t.Fatalf("async memset/copy wrong: % x ... %x", got[:20], got[n-1])
	}
	if err := s.CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoD(b, a, n); err != nil {
		t.Fatal(err)
	}
	s.Synchronize()
	d.CopyDtoH(got, b)
	if !bytes.Equal(got, src) {
		t.Fatal("async round trip differs")
	}
	// Nothing to copy or set is a no-op, null pointers included (conv1d
	// reads an empty index tensor so).
	for name, err := range map[string]error{
		"CopyHtoD": s.CopyHtoD(0, nil), "CopyDtoH": s.CopyDtoH(nil, 0), "CopyDtoD": s.CopyDtoD(0, 0, 0),
		"Memset8": s.Memset8(0, 1, 0), "Memset32": s.Memset32(0, 1, 0),
		"Device.CopyHtoD": d.CopyHtoD(0, nil), "Device.CopyDtoH": d.CopyDtoH(nil, 0), "Device.CopyDtoD": d.CopyDtoD(0, 0, 0),
	} {
		if err != nil {
			t.Errorf("%s of nothing: %v", name, err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// add1Src has no includes so this package's tests need no other package.
const add1Src = `
extern "C" __global__ void add1(float* p, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}
extern "C" __global__ void empty() {}
extern "C" __global__ void bigshared(float* out) {
  extern __shared__ float s[];
  int n = 100 * 1024 / 4;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = s[n - 1];
}
// staticplus has 4 KiB of static shared memory beside its dynamic part.
extern "C" __global__ void staticplus(float* out, int n) {
  __shared__ float st[1024];
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) st[i] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = s[n - 1] + st[1023];
}
`

func loadTestModule(t testing.TB, d *Device) *Module { return loadModule(t, d, "add1.cu", add1Src) }

// testStream creates a stream on d, destroyed when the test ends.
func testStream(t testing.TB, d *Device) *Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy() })
	return s
}

// loadModule compiles src (no includes) for d and loads it, unloaded when
// the test ends.
func loadModule(t testing.TB, d *Device, name, src string) *Module {
	t.Helper()
	cubin, err := CompileCUBIN(name, src, nil, []string{"-arch=" + d.Props().Arch()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.LoadModule(cubin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unload() })
	return m
}

// testFunction looks up the kernel name in m.
func testFunction(t testing.TB, m *Module, name string) *Function {
	t.Helper()
	fn, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return fn
}

func TestCompileError(t *testing.T) {
	testDevice(t)
	_, err := CompileCUBIN("bad.cu", "extern \"C\" __global__ void f() { undeclared_thing(); }", nil, []string{"-arch=sm_90"})
	if err == nil || !strings.Contains(err.Error(), "undeclared_thing") {
		t.Fatalf("want an error carrying the compile log, got %v", err)
	}
}

func TestLaunchAndEvents(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "add1")
	if _, err := m.Function("nope"); err == nil {
		t.Fatal("missing function found")
	}
	const n = 1000
	buf, _ := d.Alloc(4 * n)
	defer d.Free(buf)
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(i)))
	}
	d.CopyHtoD(buf, host)
	s := testStream(t, d)
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer e0.Destroy()
	defer e1.Destroy()
	e0.Record(s)
	if err := fn.Launch(LaunchConfig{Grid: D1((n + 127) / 128), Block: D1(128), Stream: s}, NewArgs().Ptr(buf).I32(n).F32(2.5)); err != nil {
		t.Fatal(err)
	}
	e1.Record(s)
	if err := e1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := Elapsed(e0, e1)
	if err != nil || ms < 0 {
		t.Fatalf("elapsed %v %v", ms, err)
	}
	d.CopyDtoH(host, buf)
	for i := range n {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:])); got != float32(i)+2.5 {
			t.Fatalf("element %d = %v", i, got)
		}
	}
	regs, err := fn.Attribute(FuncNumRegs)
	if err != nil || regs <= 0 {
		t.Fatalf("registers %d %v", regs, err)
	}
}

// TestDynamicSharedAbove48K raises a kernel's dynamic shared memory limit.
func TestDynamicSharedAbove48K(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "bigshared")
	out, _ := d.Alloc(4)
	defer d.Free(out)
	cfg := LaunchConfig{Grid: D1(1), Block: D1(256), Shared: 100 * 1024}
	if err := fn.Launch(cfg, NewArgs().Ptr(out)); err == nil {
		t.Fatal("launch above 48 KB without raising the limit succeeded")
	}
	if err := fn.SetMaxDynamicShared(100 * 1024); err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(cfg, NewArgs().Ptr(out)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	d.CopyDtoH(got, out)
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != 100*1024/4-1 {
		t.Fatalf("got %v", v)
	}
}

// TestReserveShared launches a kernel whose static plus dynamic shared memory
// exceeds 48 KiB while the dynamic part alone does not: the launch fails
// until ReserveShared raises the limit, and sizes that need no opt-in pass
// untouched.
func TestReserveShared(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "staticplus")
	out, _ := d.Alloc(4)
	defer d.Free(out)
	launch := func(dynamic int) error {
		cfg := LaunchConfig{Grid: D1(1), Block: D1(256), Shared: dynamic}
		return fn.Launch(cfg, NewArgs().Ptr(out).I32(int32(dynamic/4)))
	}
	small := 16 << 10
	if err := fn.ReserveShared(small); err != nil {
		t.Fatal(err)
	}
	if err := launch(small); err != nil {
		t.Fatal(err)
	}
	dynamic := d.Props().SharedPerBlock - 2<<10 // under 48 KiB, over it with the static 4 KiB
	if err := launch(dynamic); err == nil {
		t.Fatal("launch of static + dynamic over 48 KiB succeeded without opting in")
	}
	for range 2 {
		if err := fn.ReserveShared(dynamic); err != nil {
			t.Fatal(err)
		}
	}
	if err := launch(dynamic); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	d.CopyDtoH(got, out)
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != float32(dynamic/4-1)+1 {
		t.Fatalf("got %v", v)
	}
}

// TestOccupancyMaxActiveClusters checks the cluster occupancy query against
// the per-SM block limit: a wave of clusters never holds more blocks than
// the SMs do, and a cluster over 8 blocks is counted once allowed.
func TestOccupancyMaxActiveClusters(t *testing.T) {
	d := testDevice(t)
	p := d.Props()
	if p.Major < 9 {
		t.Skip("clusters need compute capability 9.0")
	}
	m := loadTestModule(t, d)
	add1 := testFunction(t, m, "add1")
	big := testFunction(t, m, "bigshared")
	if err := big.SetMaxDynamicShared(100 * 1024); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fn          *Function
		block, smem int
		cluster     int
		nonPortable bool
	}{
		{add1, 128, 0, 2, false},
		{add1, 1024, 0, 8, false},
		{big, 256, 100 * 1024, 2, false},
		{big, 256, 100 * 1024, 8, false},
		{big, 256, 100 * 1024, 16, true},
	} {
		if c.nonPortable {
			if err := c.fn.SetAttribute(FuncNonPortableClusterOK, 1); err != nil {
				t.Fatal(err)
			}
		}
		cfg := LaunchConfig{Grid: D1(c.cluster), Block: D1(c.block), Shared: c.smem, Cluster: D1(c.cluster)}
		n, err := c.fn.MaxActiveClusters(cfg)
		if err != nil {
			t.Fatalf("%s block %d shared %d cluster %d: %v", c.fn.Name, c.block, c.smem, c.cluster, err)
		}
		perSM, err := c.fn.MaxActiveBlocksPerSM(c.block, c.smem)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s block %d shared %d cluster %d: %d clusters at once (%d blocks an SM, %d SMs)",
			c.fn.Name, c.block, c.smem, c.cluster, n, perSM, p.SMs)
		if n < 1 || n*c.cluster > perSM*p.SMs {
			t.Errorf("%s cluster %d: %d clusters, %d blocks, over %d blocks an SM on %d SMs",
				c.fn.Name, c.cluster, n, n*c.cluster, perSM, p.SMs)
		}
	}
}

// TestLaunchAllocatesNothing: the hot path (arguments, launch, event record)
// must not allocate.
func TestLaunchAllocatesNothing(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "add1")
	buf, _ := d.Alloc(4 * 128)
	defer d.Free(buf)
	s := testStream(t, d)
	ev, _ := d.NewEvent()
	defer ev.Destroy()
	cfg := LaunchConfig{Grid: D1(1), Block: D1(128), Stream: s}
	allocs := testing.AllocsPerRun(200, func() {
		if err := fn.Launch(cfg, NewArgs().Ptr(buf).I32(128).F32(1)); err != nil {
			t.Fatal(err)
		}
		if err := ev.Record(s); err != nil {
			t.Fatal(err)
		}
	})
	s.Synchronize()
	if allocs != 0 {
		t.Fatalf("launch + record allocates %v times per call", allocs)
	}
	clusterCfg := LaunchConfig{Grid: D1(2), Block: D1(128), Stream: s, Cluster: D1(2)}
	allocs = testing.AllocsPerRun(200, func() {
		if err := fn.Launch(clusterCfg, NewArgs().Ptr(buf).I32(128).F32(1)); err != nil {
			t.Fatal(err)
		}
	})
	s.Synchronize()
	if allocs != 0 {
		t.Fatalf("cluster launch allocates %v times per call", allocs)
	}
}

// TestGoroutinesAndThreads runs many goroutines that allocate, copy and
// launch while other goroutines keep clearing the current context on
// whatever OS thread they land on: every public call must make the device's
// context current itself.
func TestGoroutinesAndThreads(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "add1")
	stop := make(chan struct{})
	var clearers sync.WaitGroup
	for range 4 {
		clearers.Add(1)
		go func() {
			defer clearers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.LockOSThread()
				cuCtxSetCurrent.call(0)
				runtime.UnlockOSThread()
				runtime.Gosched()
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			const n = 4096
			host := make([]byte, 4*n)
			for it := range 20 {
				p, err := d.Alloc(4 * n)
				if err != nil {
					errs <- err
					return
				}
				for i := range n {
					binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(g*it+i)))
				}
				runtime.Gosched()
				if err := d.CopyHtoD(p, host); err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := fn.Launch(LaunchConfig{Grid: D1(n / 256), Block: D1(256)}, NewArgs().Ptr(p).I32(n).F32(1)); err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := d.CopyDtoH(host, p); err != nil {
					errs <- err
					return
				}
				for i := range n {
					if v := math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:])); v != float32(g*it+i)+1 {
						errs <- &Error{Call: "check", Message: "wrong value"}
						return
					}
				}
				d.Free(p)
			}
		}()
	}
	wg.Wait()
	close(stop)
	clearers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkLaunch measures the host cost of one kernel launch.
func BenchmarkLaunch(b *testing.B) {
	d := testDevice(b)
	m := loadTestModule(b, d)
	fn := testFunction(b, m, "empty")
	s := testStream(b, d)
	cfg := LaunchConfig{Grid: D1(1), Block: D1(32), Stream: s}
	b.ReportAllocs()
	for b.Loop() {
		if err := fn.Launch(cfg, NewArgs()); err != nil {
			b.Fatal(err)
		}
	}
	s.Synchronize()
}

// TestOpenReleasesContextOnError: when the device's properties cannot be
// read, Open hands back the primary context it retained and keeps no
// Device, so that a later Open starts afresh. The fake driver has one
// device whose name cannot be read.
func TestOpenReleasesContextOnError(t *testing.T) {
	const ordinal, handle = 7, 3
	retained, released := 0, 0
	fakeLibrary(t, libDriver, map[*binding]any{
		cuDeviceGetCount: func(n uintptr) uintptr {
			*(*int32)(cPointer(n)) = ordinal + 1
			return 0
		},
		cuDeviceGet: func(dev, ord uintptr) uintptr {
			*(*int32)(cPointer(dev)) = handle
			return 0
		},
		cuDevicePrimaryCtxRet: func(ctx, dev uintptr) uintptr {
			if int32(dev) == handle {
				retained++
			}
			*(*uintptr)(cPointer(ctx)) = 0xc0
			return 0
		},
		cuDevicePrimaryCtxRel: func(dev uintptr) uintptr {
			if int32(dev) == handle {
				released++
			}
			return 0
		},
		cuDeviceGetName:  func(buf, n, dev uintptr) uintptr { return 999 }, // CUDA_ERROR_UNKNOWN
		cuGetErrorName:   func(code, str uintptr) uintptr { return 1 },
		cuGetErrorString: func(code, str uintptr) uintptr { return 1 },
	})
	devMu.Lock()
	saved, had := devices[ordinal]
	delete(devices, ordinal)
	devMu.Unlock()
	t.Cleanup(func() {
		devMu.Lock()
		if had {
			devices[ordinal] = saved
		} else {
			delete(devices, ordinal)
		}
		devMu.Unlock()
	})
	for range 2 {
		if d, err := Open(ordinal); err == nil || d != nil {
			t.Fatalf("Open = %v, %v; want an error", d, err)
		}
	}
	if retained != 2 || released != 2 {
		t.Errorf("primary context retained %d times and released %d; want 2 and 2", retained, released)
	}
	devMu.Lock()
	defer devMu.Unlock()
	if devices[ordinal] != nil {
		t.Error("Open kept a device it could not describe")
	}
}

// TestEnvNVRTCNamesMissingFile: $KITTENS_NVRTC naming a library that is
// not there is an error that names the variable and the path, not a quiet
// fall back to another NVRTC.
func TestEnvNVRTCNamesMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnvrtc.so.12")
	t.Setenv(EnvNVRTC, missing)
	path, _, err := openNVRTC()
	var le *LoadError
	if err == nil || !errors.As(err, &le) || !strings.Contains(err.Error(), EnvNVRTC) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("opened %q, error %v; want a *LoadError naming %s and %s", path, err, EnvNVRTC, missing)
	}
	if len(le.Tried) != 0 {
		t.Errorf("searched on after the named library failed: %v", le.Tried)
	}
}

// TestNilDevice: a nil *Device (what an unchecked Default leaves) and a nil
// *Stream give errors from every method that can return one, and call no
// driver; Props panics with ErrNilDevice.
func TestNilDevice(t *testing.T) {
	var d *Device
	one := []byte{1}
	for what, err := range map[string]error{
		"NewStream":                 func() error { _, err := d.NewStream(); return err }(),
		"NewEvent":                  func() error { _, err := d.NewEvent(); return err }(),
		"Alloc":                     func() error { _, err := d.Alloc(16); return err }(),
		"Free":                      d.Free(0x1000),
		"LoadModule":                func() error { _, err := d.LoadModule(one); return err }(),
		"MemInfo":                   func() error { _, _, err := d.MemInfo(); return err }(),
		"Synchronize":               d.Synchronize(),
		"ResetPersistingL2":         d.ResetPersistingL2(),
		"CopyHtoD":                  d.CopyHtoD(0x1000, one),
		"CopyDtoH":                  d.CopyDtoH(one, 0x1000),
		"CopyDtoD":                  d.CopyDtoD(0x1000, 0x2000, 1),
		"DefaultStream.Synchronize": d.DefaultStream().Synchronize(),
		"DefaultStream.Memset8":     d.DefaultStream().Memset8(0x1000, 0, 1),
	} {
		if !errors.Is(err, ErrNilDevice) {
			t.Errorf("%s on a nil device: error %v, want ErrNilDevice", what, err)
		}
	}
	var s *Stream
	if err := s.Synchronize(); err == nil || !strings.Contains(err.Error(), "nil *Stream") {
		t.Errorf("Synchronize of a nil stream: error %v", err)
	}
	if err := s.CopyHtoD(0x1000, one); err == nil {
		t.Error("CopyHtoD on a nil stream: no error")
	}
	if err := s.Destroy(); err != nil || s.Device() != nil {
		t.Errorf("nil stream: Destroy %v, Device %v; want nothing to do", err, s.Device())
	}
	defer func() {
		if r := recover(); r != ErrNilDevice {
			t.Errorf("Props of a nil device: panic %v, want ErrNilDevice", r)
		}
	}()
	d.Props()
}
