// Package gputest gives tests a device when there is one. Without a GPU,
// tests that need one skip, unless KITTENS_REQUIRE_GPU=1 is set (as on the
// GPU machine), which turns every such skip into a failure.
//
// RunChecks and RunBenches run the cases of one family, the suite.Family
// its test-support package returns, as subtests and sub-benchmarks.
package gputest

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// EnvRequire names the variable that makes a missing GPU fail tests.
const EnvRequire = "KITTENS_REQUIRE_GPU"

// Device returns device 0 or skips the test (fails it under KITTENS_REQUIRE_GPU=1).
func Device(t testing.TB) *cuda.Device {
	t.Helper()
	d, err := cuda.Default()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("no GPU but %s=1: %v", EnvRequire, err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return d
}

// Maybe returns device 0, or nil when there is none (and no GPU is required).
func Maybe(t testing.TB) *cuda.Device {
	t.Helper()
	d, err := cuda.Default()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("no GPU but %s=1: %v", EnvRequire, err)
		}
		return nil
	}
	return d
}

// RunChecks runs every parity case of a family as a subtest named op/case
// (see Run).
func RunChecks(t *testing.T, f suite.Family) {
	ops := f.Ops
	if len(ops) == 0 {
		t.Fatalf("family %q has no ops", f.Name)
	}
	var checks []check.Case
	for _, op := range ops {
		for _, c := range op.Checks {
			c.Name = op.Name + "/" + c.Name
			checks = append(checks, c)
		}
	}
	Run(t, checks)
}

// Run runs parity cases as subtests named by their Name: on the GPU against
// the CPU reference when there is one, otherwise the host path alone (every
// output must be written). Each case draws fresh inputs; the seed is logged
// so a failure can be replayed. On the GPU the cases first warm up together
// (check.WarmAll), which compiles their kernels in parallel: those of the
// cases -test.run selects.
func Run(t *testing.T, checks []check.Case) {
	dev := Maybe(t)
	if dev != nil {
		run := runPattern()
		var selected []check.Case
		for _, c := range checks {
			if run.selects(t.Name() + "/" + c.Name) {
				selected = append(selected, c)
			}
		}
		check.WarmAll(dev, selected, nil)
	}
	for _, c := range checks {
		t.Run(c.Name, func(t *testing.T) {
			rng, seed := tensor.NewRNG()
			r, err := c.Run(dev, rng)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if !r.Pass {
				t.Fatalf("seed %d: %v", seed, r)
			}
			t.Log(r)
		})
	}
}

// pattern is a -test.run pattern cut into its levels, as go test cuts it:
// at each slash outside brackets and parentheses. Level i must match the
// i-th element of a test's name; levels past the pattern's match anything.
type pattern []*regexp.Regexp

// runPattern is this test binary's -test.run pattern (nil: every test, as
// is one that does not compile, which go test reports itself).
func runPattern() pattern {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	var p pattern
	for _, level := range splitLevels(f.Value.String()) {
		re, err := regexp.Compile(level)
		if err != nil {
			return nil
		}
		p = append(p, re)
	}
	return p
}

// splitLevels cuts a -test.run pattern at each slash outside brackets and
// parentheses.
func splitLevels(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// selects reports whether p selects the test of the given full name
// (levels joined by slashes; spaces become underscores, as t.Run makes
// them).
func (p pattern) selects(name string) bool {
	for i, elem := range strings.Split(strings.ReplaceAll(name, " ", "_"), "/") {
		if i < len(p) && !p[i].MatchString(elem) {
			return false
		}
	}
	return true
}

// RunBenches times every benchmark case of a family as a sub-benchmark
// (GPU only) and reports median µs and GB/s. The measurement is
// bench.Measure's own (events, rotation, median), so b.N is not used.
func RunBenches(b *testing.B, f suite.Family) {
	dev := Device(b)
	for _, op := range f.Ops {
		for _, c := range op.Benches {
			b.Run(op.Name+"/"+c.Name, func(b *testing.B) { Measure(b, dev, c) })
		}
	}
}

// Measure times one benchmark case with bench.Measure and reports its
// median µs and GB/s as the benchmark's metrics (b.N is not used).
func Measure(b *testing.B, dev *cuda.Device, c bench.Case) {
	r, err := bench.Measure(dev, c, bench.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.MedianUS, "µs")
	b.ReportMetric(r.GBs, "GB/s")
}

// OnHostAndDevice runs op on host copies of ts, then, where a GPU is found,
// on device copies, and hands check each run's tensors on the host, with
// where it ran ("host" or "device").
func OnHostAndDevice(t testing.TB, ts []*tensor.Tensor, op func(ts []*tensor.Tensor) error, check func(where string, ts []*tensor.Tensor)) {
	t.Helper()
	devs := []*cuda.Device{nil} // the host
	if d := Maybe(t); d != nil {
		devs = append(devs, d)
	}
	for _, dev := range devs {
		run := make([]*tensor.Tensor, len(ts))
		for i, h := range ts {
			var err error
			if dev == nil {
				run[i], err = tensor.NewStrided(h.DType(), h.Shape(), h.Strides())
				if err == nil {
					err = run[i].CopyFrom(h)
				}
			} else if run[i], err = h.ToDevice(dev); err == nil {
				defer run[i].Free()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := op(run); err != nil {
			t.Fatal(err)
		}
		where := "host"
		if dev != nil {
			where = "device"
			for i, d := range run {
				h, err := d.ToHost()
				if err != nil {
					t.Fatal(err)
				}
				run[i] = h
			}
		}
		check(where, run)
	}
}
