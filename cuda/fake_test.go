package cuda

import (
	"testing"

	"github.com/ebitengine/purego"
)

// fakeLibrary points the bindings of library l at Go callbacks for the
// duration of the test, as if the library had been loaded (whether or not
// this machine has it), and restores them afterwards.
func fakeLibrary(t *testing.T, l lib, fns map[*binding]any) {
	t.Helper()
	loadErr := &nvrtcErr
	if l == libDriver {
		Init() // settle the Once, whatever it finds
		loadErr = &driverErr
	} else {
		initNVRTC()
	}
	saved := map[*binding]uintptr{}
	for _, b := range bindings {
		if b.lib == l {
			saved[b] = b.fn
		}
	}
	savedErr := *loadErr
	t.Cleanup(func() {
		for b, fn := range saved {
			b.fn = fn
		}
		*loadErr = savedErr
	})
	*loadErr = nil
	for b, fn := range fns {
		if b.lib != l {
			t.Fatalf("fakeLibrary: %s is not in library %d", b.name, l)
		}
		b.fn = purego.NewCallback(fn)
	}
}

// TestL2EvictLastSetting: off by default, Props carries the setting, and a
// nil device ignores it.
func TestL2EvictLastSetting(t *testing.T) {
	d := &Device{props: Props{Name: "fake", L2Bytes: 50 << 20}}
	if d.Props().L2EvictLast {
		t.Error("L2EvictLast on by default")
	}
	d.SetL2EvictLast(true)
	if p := d.Props(); !p.L2EvictLast || p.L2Bytes != 50<<20 {
		t.Errorf("after SetL2EvictLast(true): %+v", p)
	}
	d.SetL2EvictLast(false)
	if d.Props().L2EvictLast {
		t.Error("SetL2EvictLast(false) left it on")
	}
	var none *Device
	none.SetL2EvictLast(true) // no panic
}
