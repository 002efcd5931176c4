package cuda

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestDependentLaunchRefusesBeforeTheDriver: the legacy default stream is
// refused without a GPU, and turning dependent launches off never fails.
func TestDependentLaunchRefusesBeforeTheDriver(t *testing.T) {
	for _, s := range []*Stream{nil, {}} {
		if err := s.SetDependentLaunch(true); err == nil || !strings.Contains(err.Error(), "legacy default stream") {
			t.Errorf("legacy stream: got %v", err)
		}
		if err := s.SetDependentLaunch(false); err != nil || s.DependentLaunch() {
			t.Errorf("off: %v, on = %v", err, s.DependentLaunch())
		}
	}
}

// pdlSrc's late_write lets the next kernel launch at once, then spins for
// ns nanoseconds before it stores v; read_flag copies the flag, after
// griddepcontrol.wait when wait is set.
const pdlSrc = `
extern "C" __global__ void late_write(int* flag, unsigned long long ns, int v) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  *(volatile int*)flag = v;
}
extern "C" __global__ void read_flag(const int* flag, int* out, int wait) {
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  *out = *(volatile const int*)flag;
}
`

// TestDependentLaunch shows that a dependent launch really starts the next
// kernel while the one before it runs: a kernel that reads a flag without
// griddepcontrol.wait sees it before the earlier kernel writes it, and
// one that waits sees the write. Without dependent launches, and for a
// function that does not allow them, the reader sees it too. A captured
// graph keeps the overlap.
func TestDependentLaunch(t *testing.T) {
	d := testDevice(t)
	s := testStream(t, d)
	if err := s.SetDependentLaunch(true); !d.Props().DependentLaunch() {
		if err == nil || !strings.Contains(err.Error(), "compute capability 9.0") {
			t.Fatalf("compute capability %d.%d: got %v", d.Props().Major, d.Props().Minor, err)
		}
		t.Skip("dependent launches need compute capability 9.0")
	} else if err != nil || !s.DependentLaunch() {
		t.Fatalf("SetDependentLaunch: %v, on = %v", err, s.DependentLaunch())
	}
	m := loadModule(t, d, "pdl.cu", pdlSrc)
	late := testFunction(t, m, "late_write")
	read := testFunction(t, m, "read_flag")
	plain := testFunction(t, m, "read_flag")
	read.AllowDependentLaunch()
	flag, _ := d.Alloc(4)
	out, _ := d.Alloc(4 * 8)
	defer d.Free(flag)
	defer d.Free(out)
	one := LaunchConfig{Grid: D1(1), Block: D1(32), Stream: s}
	// step queues: flag = 0, late_write(v) for 200 µs, read_flag into
	// out[slot] (plain's, without the permission, where wait is 2); the
	// memset orders as usual, after the previous step.
	step := func(v, slot, wait int) error {
		if err := s.Memset32(flag, 0, 1); err != nil {
			return err
		}
		if err := late.Launch(one, NewArgs().Ptr(flag).I64(200_000).I32(int32(v))); err != nil {
			return err
		}
		reader := read
		if wait == 2 {
			reader, wait = plain, 0
		}
		return reader.Launch(one, NewArgs().Ptr(flag).Ptr(out+DevicePtr(4*slot)).I32(int32(wait)))
	}
	if err := s.Memset32(out, 0xdead, 8); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct{ v, slot, wait int }{{1, 0, 0}, {2, 1, 1}, {6, 5, 2}} {
		if err := step(st.v, st.slot, st.wait); err != nil {
			t.Fatal(err)
		}
	}
	s.SetDependentLaunch(false)
	if err := step(3, 2, 0); err != nil {
		t.Fatal(err)
	}
	s.SetDependentLaunch(true)
	g, err := s.Capture(CaptureGlobal, func() error {
		if err := step(4, 3, 0); err != nil {
			return err
		}
		return step(5, 4, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if err := g.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4*8)
	if err := d.CopyDtoH(b, out); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 6)
	for i := range got {
		got[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	want := []int32{0, 2, 3, 0, 5, 6}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("flags read %v, want %v (0: read before the earlier kernel wrote it)", got, want)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := read.Launch(one, NewArgs().Ptr(flag).Ptr(out).I32(1)); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("a dependent launch allocates %v times per call", allocs)
	}
}
