// Package check compares a kernel's outputs with the CPU reference. Run
// takes host tensors, runs the op once on the host (the reference, in
// float64) and once on the device with poisoned outputs, and compares
// element by element: max-abs error, relative L2 error, NaN and unwritten
// elements. Integer outputs must match exactly. Bytes the op may not write
// must come back as they went in: every input's, and the gaps between the
// rows of a strided output. The device call is also captured into a CUDA
// graph and replayed, its kernels launched as dependent launches on
// devices that have them, and must write exactly what it wrote when
// launched directly. Without a device, Run checks the host path
// alone: that it wrote every element of each poisoned output, float or
// integer, and nothing it may not write.
//
// A Case names a Spec with the random draw that builds it. Each family's
// test-support package lists its cases, plain []Case values, in the
// suite.Op of each op, and registry.Families gathers every family's; the
// tests (internal/gputest.RunChecks) and the kittens command run them, after
// WarmAll has built their kernels in parallel.
package check

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Tolerance bounds the error of one output: every element must satisfy
// |got−want| ≤ Atol + Rtol·|want|, and ‖got−want‖₂/‖want‖₂ ≤ RelNorm (when
// RelNorm > 0). A zero Tolerance demands exact equality.
type Tolerance struct{ Atol, Rtol, RelNorm float64 }

// ForDType is the elementwise tolerance of an output rounded once to dt
// from an fp32 computation: two units in the last place of the format
// (one for the reference's rounding, one for the kernel's), relative, plus a
// matching absolute floor for values near zero. An f32 output gets 1e-5
// (about 80 units): there the error of the fp32 computation itself, not the
// final rounding, is what the bound must cover.
func ForDType(dt tensor.DType) Tolerance {
	switch dt {
	case tensor.F32:
		return Tolerance{Atol: 1e-5, Rtol: 1e-5, RelNorm: 1e-5}
	case tensor.F16:
		return Tolerance{Atol: 1e-3, Rtol: 2e-3, RelNorm: 1e-3}
	case tensor.BF16:
		return Tolerance{Atol: 1e-2, Rtol: 1.6e-2, RelNorm: 8e-3}
	case tensor.F8E4M3:
		return Tolerance{Atol: 0.07, Rtol: 0.26, RelNorm: 0.07}
	case tensor.F8E5M2:
		return Tolerance{Atol: 0.14, Rtol: 0.51, RelNorm: 0.14}
	}
	return Tolerance{}
}

// Report is the outcome of one comparison.
type Report struct {
	Name      string
	Elements  int
	MaxAbs    float64 // largest |got − want|
	RelNorm   float64 // ‖got − want‖₂ / ‖want‖₂
	Bad       int     // elements outside the tolerance (NaN included)
	Unwritten int     // elements still holding the poison pattern
	Stray     int     // bytes the op may not write that changed: an input's, a gap between an output's rows
	Worst     string  // where the worst element is and what it held
	Pass      bool
	CPUOnly   bool // no device: the host path ran alone
}

func (r Report) String() string {
	var s string
	if r.CPUOnly {
		s = fmt.Sprintf("%s: cpu only, %d elements, unwritten %d", r.Name, r.Elements, r.Unwritten)
	} else {
		s = fmt.Sprintf("%s: max|Δ| %.3g, rel %.3g, bad %d/%d, unwritten %d", r.Name, r.MaxAbs, r.RelNorm, r.Bad, r.Elements, r.Unwritten)
	}
	if r.Stray > 0 {
		s += fmt.Sprintf(", stray bytes %d", r.Stray)
	}
	if r.Worst != "" && !r.Pass {
		s += " (" + r.Worst + ")"
	}
	return s
}

// fail marks r failed for reason w, after the reasons it already gives.
func (r *Report) fail(w string) {
	if r.Pass || r.Worst == "" {
		r.Worst = w
	} else {
		r.Worst += "; " + w
	}
	r.Pass = false
}

// Merge combines the reports of several outputs of one case.
func Merge(rs ...Report) Report {
	if len(rs) == 0 {
		return Report{Pass: false, Worst: "no outputs compared"}
	}
	m := Report{Pass: true, CPUOnly: true}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
		m.Elements += r.Elements
		m.MaxAbs = math.Max(m.MaxAbs, r.MaxAbs)
		m.RelNorm = math.Max(m.RelNorm, r.RelNorm)
		m.Bad += r.Bad
		m.Unwritten += r.Unwritten
		m.Stray += r.Stray
		m.Pass = m.Pass && r.Pass
		m.CPUOnly = m.CPUOnly && r.CPUOnly
		if !r.Pass && m.Worst == "" {
			m.Worst = r.Name + ": " + r.Worst
		}
	}
	m.Name = strings.Join(names, "+")
	return m
}

// Compare checks got against want. Where want is NaN, got must be NaN too;
// infinities must match exactly.
func Compare(name string, got, want []float64, tol Tolerance) Report {
	r := Report{Name: name, Elements: len(want), Pass: true}
	if len(got) != len(want) {
		r.Pass, r.Worst = false, fmt.Sprintf("length %d, want %d", len(got), len(want))
		return r
	}
	var num, den float64
	worst := -1.0
	for i := range want {
		g, w := got[i], want[i]
		var d float64
		bad := false
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			bad = math.IsNaN(w) != math.IsNaN(g)
			if bad {
				d = math.Inf(1)
			}
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			bad = g != w
			if bad {
				d = math.Inf(1)
			}
		default:
			d = math.Abs(g - w)
			bad = d > tol.Atol+tol.Rtol*math.Abs(w)
			num += d * d
			den += w * w
		}
		if bad {
			r.Bad++
		}
		if d > r.MaxAbs || (bad && worst < 0) {
			r.MaxAbs = math.Max(r.MaxAbs, d)
		}
		if bad && d > worst {
			worst = d
			r.Worst = fmt.Sprintf("element %d: got %g, want %g", i, g, w)
		}
	}
	if den > 0 {
		r.RelNorm = math.Sqrt(num / den)
	} else if num > 0 {
		r.RelNorm = math.Inf(1)
	}
	if r.Bad > 0 || (tol.RelNorm > 0 && r.RelNorm > tol.RelNorm) {
		r.Pass = false
		if r.Worst == "" {
			r.Worst = fmt.Sprintf("relative norm %.3g over %.3g", r.RelNorm, tol.RelNorm)
		}
	}
	return r
}

// Exact checks integer outputs for equality.
func Exact(name string, got, want []int64) Report {
	r := Report{Name: name, Elements: len(want), Pass: len(got) == len(want)}
	for i := range want {
		if i < len(got) && got[i] != want[i] {
			if r.Bad == 0 {
				r.Worst = fmt.Sprintf("element %d: got %d, want %d", i, got[i], want[i])
			}
			r.Bad++
			r.Pass = false
		}
	}
	return r
}

// poisonByte is the byte Poison (tensor.Tensor.Poison) fills an output's
// storage with; an element whose bytes all still hold it was never written.
// In a float dtype of two bytes or more that pattern is a NaN with the sign
// and every payload bit set, which no operation produces unless an input
// holds it (a NaN it makes has the default payload, such as 0xFFC00000 in
// f32 on amd64); in the one-byte fp8 formats it is the negative NaN. In an integer dtype it is
// −1 (255 in u8): poison an integer output only where the op never writes
// that value (topk's indices lie in [0, N)).
const poisonByte = 0xFF

// elementBytes is the u8 view of host tensor t, of any dtype and layout,
// with one more dimension: the bytes of each element (the gaps between rows
// left out).
func elementBytes(t *tensor.Tensor) *tensor.Tensor {
	size := t.DType().Size()
	shape := append(slices.Clone(t.Shape()), size)
	strides := make([]int, len(shape))
	for i, st := range t.Strides() {
		strides[i] = st * size
	}
	strides[len(strides)-1] = 1
	v, err := t.View(tensor.U8, shape, strides)
	if err != nil {
		panic(err) // the bytes of a valid tensor's elements form a valid u8 layout
	}
	return v
}

// unwritten counts the elements of host tensor t, of any dtype and layout,
// whose bytes all hold poisonByte.
func unwritten(t *tensor.Tensor) int {
	size := t.DType().Size()
	b := elementBytes(t).Int64s()
	n := 0
	for i := 0; i < len(b); i += size {
		if !slices.ContainsFunc(b[i:i+size], func(x int64) bool { return x != poisonByte }) {
			n++
		}
	}
	return n
}

// Spec is one parity case: host tensors (inputs filled, outputs of the right
// shape), which of them the op writes, and the op call itself.
type Spec struct {
	Tensors []*tensor.Tensor
	Names   []string // one per tensor, for reports
	Outputs []int    // tensors to compare after the run; the op may write no other
	// Poison lists the pure outputs: poisoned before each run, then
	// checked for elements that still hold the poison (see poisonByte).
	Poison []int
	// Marked lists outputs the case poisoned in part itself: the elements
	// the op must write hold the poison, the others values it must keep
	// (conv1d's token rows, where padding rows are left alone). Run leaves
	// them as they are and counts the poison left in them, as in Poison's.
	Marked []int
	Tol    map[int]Tolerance // per output; default ForDType of the output
	// Run calls the op on ts: host tensors with a nil stream for the
	// reference; device tensors with a stream of the harness's, once
	// directly and once while the stream is captured into a CUDA graph (see
	// the package Run). While capturing, an op that would wait for the
	// stream to check the values of a device tensor (indices, positions)
	// must be told to skip that check, as a serving loop's graph does: Run
	// asks s.Capturing().
	Run func(s *cuda.Stream, ts []*tensor.Tensor) error
}

// unwritten counts the elements of output i (on the host) that still hold
// the poison: none for an output the spec does not poison, such as one the
// op updates in place.
func (s Spec) unwritten(i int, t *tensor.Tensor) int {
	if !slices.Contains(s.Poison, i) && !slices.Contains(s.Marked, i) {
		return 0
	}
	return unwritten(t)
}

// stray counts the bytes of host tensor after's storage span that differ
// from before's (the same tensor before the op ran) where the op may not
// write: anywhere in an input, between the elements (the gaps between rows)
// of an output. It also returns the offset of the first.
func stray(after, before *tensor.Tensor, output bool) (n, first int) {
	a, b := after.Bytes(), before.Bytes()
	var elem []byte // nonzero at the bytes of an output's elements
	if output {
		if after.Contiguous() {
			return 0, 0 // no gaps
		}
		m := clone(after)
		clear(m.Bytes())
		v := elementBytes(m)
		ones := make([]int64, v.Numel())
		for i := range ones {
			ones[i] = 1
		}
		v.SetInt64s(ones)
		elem = m.Bytes()
	}
	for i := range a {
		if a[i] != b[i] && (elem == nil || elem[i] == 0) {
			if n == 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// strays checks every tensor of ts (on the host) against before, the same
// tensors before the op ran (see stray), and folds the count into r: a
// stray byte fails the case.
func (s Spec) strays(r Report, ts, before []*tensor.Tensor) Report {
	for i, t := range ts {
		out := slices.Contains(s.Outputs, i)
		n, first := stray(t, before[i], out)
		if n == 0 {
			continue
		}
		if r.Stray == 0 {
			where := "an input"
			if out {
				where = "between its elements"
			}
			r.fail(fmt.Sprintf("%s: %d bytes written %s (first at byte %d)", s.Names[i], n, where, first))
		}
		r.Stray += n
		r.Pass = false
	}
	return r
}

func clone(t *tensor.Tensor) *tensor.Tensor {
	c, _ := tensor.NewStrided(t.DType(), t.Shape(), t.Strides())
	copy(c.Bytes(), t.Bytes())
	return c
}

// Run executes a Spec: the host path gives the reference; with a device, the
// device path runs on copies and is compared with it, and every tensor comes
// back to be checked for stray writes: a changed byte of an input, or of a
// gap between an output's rows, fails the case. Then the device path runs
// again from the same bytes, captured into a CUDA graph and replayed, as
// serving engines run their decode steps, with dependent launches where the
// device has them (see onDevice): every tensor must come back exactly as
// the direct launch left it. With a nil device the host path
// runs alone, and only what it wrote is checked: elements of the poisoned
// outputs it never wrote, and stray writes.
func Run(dev *cuda.Device, s Spec) (Report, error) {
	ref := make([]*tensor.Tensor, len(s.Tensors))
	for i, t := range s.Tensors {
		ref[i] = clone(t)
	}
	for _, i := range s.Poison {
		ref[i].Poison()
	}
	// before is what every tensor holds as the op starts, on the host and
	// on the device alike.
	before := make([]*tensor.Tensor, len(ref))
	for i, t := range ref {
		before[i] = clone(t)
	}
	if err := s.Run(nil, ref); err != nil {
		return Report{}, fmt.Errorf("host reference: %w", err)
	}
	if dev == nil {
		var rs []Report
		for _, i := range s.Outputs {
			u := s.unwritten(i, ref[i])
			rs = append(rs, Report{Name: s.Names[i], Elements: ref[i].Numel(), Unwritten: u, Pass: u == 0, CPUOnly: true,
				Worst: fmt.Sprintf("%d elements never written", u)})
		}
		return s.strays(Merge(rs...), ref, before), nil
	}
	back, err := s.onDevice(dev, false)
	if err != nil {
		return Report{}, err
	}
	var rs []Report
	for _, i := range s.Outputs {
		got := back[i]
		var r Report
		if got.DType().IsFloat() {
			tol, ok := s.Tol[i]
			if !ok {
				tol = ForDType(got.DType())
			}
			r = Compare(s.Names[i], got.Float64s(), ref[i].Float64s(), tol)
		} else {
			r = Exact(s.Names[i], got.Int64s(), ref[i].Int64s())
		}
		r.Unwritten = s.unwritten(i, got)
		if r.Unwritten > 0 {
			r.Pass = false
		}
		rs = append(rs, r)
	}
	r := s.strays(Merge(rs...), back, before)
	replay, err := s.onDevice(dev, true)
	if err != nil {
		return Report{}, err
	}
	for i := range back {
		if j := firstDiff(replay[i].Bytes(), back[i].Bytes()); j >= 0 {
			r.fail(fmt.Sprintf("%s: replayed from a CUDA graph, byte %d differs from the direct launch's", s.Names[i], j))
			break
		}
	}
	return r, nil
}

// Warm runs the case's device path the way Run starts it, on fresh device
// copies of its tensors: the op once on a stream of its own and, where the
// device has dependent launches, once more on a stream set for them. It
// compares nothing and captures nothing, so it only makes the process load
// every kernel the case uses (compiling what the disk cache lacks); Run
// then finds them built. Several cases may warm at once from different
// goroutines, which turns the compiles of a long list of cases into
// parallel work; a Run, whose capture other goroutines' synchronizing calls
// would break, must not overlap them. The error is the op's or the
// driver's.
func Warm(dev *cuda.Device, s Spec) error {
	if dev == nil {
		return errors.New("check.Warm: no device: only a device path has kernels to load")
	}
	return s.withDevice(dev, func(st *cuda.Stream, devTS []*tensor.Tensor) error {
		if err := s.Run(st, devTS); err != nil {
			return err
		}
		if err := st.Synchronize(); err != nil {
			return err
		}
		if !dev.Props().DependentLaunch() {
			return nil
		}
		return s.runDependent(st, devTS)
	})
}

// withDevice copies the case's tensors to dev, poisons the pure outputs and
// calls fn with them and a stream of its own; it frees both after.
func (s Spec) withDevice(dev *cuda.Device, fn func(st *cuda.Stream, devTS []*tensor.Tensor) error) error {
	devTS := make([]*tensor.Tensor, len(s.Tensors))
	defer func() {
		for _, t := range devTS {
			t.Free()
		}
	}()
	if err := s.load(dev, devTS); err != nil {
		return err
	}
	st, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	return fn(st, devTS)
}

// runDependent sets st for dependent launches and runs the op there once,
// which loads its kernels built for them, and waits for it.
func (s Spec) runDependent(st *cuda.Stream, devTS []*tensor.Tensor) error {
	if err := st.SetDependentLaunch(true); err != nil {
		return err
	}
	if err := s.Run(st, devTS); err != nil {
		return fmt.Errorf("device, dependent launches: %w", err)
	}
	if err := st.Synchronize(); err != nil {
		return fmt.Errorf("device, dependent launches: %w", err)
	}
	return nil
}

// onDevice copies the case's tensors to dev, poisons the pure outputs, runs
// the op on a stream of its own, directly or captured into a CUDA graph
// and replayed, and returns every tensor copied back to the host. Where the
// device has dependent launches (compute capability 9.0), the graph is
// captured on a stream set for them, so that it holds the op's kernels
// built for them (jit.Kernel.Dependent), behind restore_late: the tensors
// hold 0xFF bytes until it has spun for a while and written their starting
// bytes back, and the op's first kernel is free to launch meanwhile, so a
// kernel that reads or writes before it waits for the grids before it
// cannot replay what the direct launch wrote.
func (s Spec) onDevice(dev *cuda.Device, graph bool) ([]*tensor.Tensor, error) {
	var back []*tensor.Tensor
	err := s.withDevice(dev, func(st *cuda.Stream, devTS []*tensor.Tensor) error {
		run := func() error { return s.Run(st, devTS) }
		if graph && dev.Props().DependentLaunch() {
			// Dependent launches, behind a kernel that gives the tensors
			// their bytes back only late (late.cu). The op's kernels built
			// for them load in a first run, outside the capture; the case
			// then starts again from its bytes.
			if err := s.runDependent(st, devTS); err != nil {
				return err
			}
			if err := s.load(dev, devTS); err != nil {
				return err
			}
			late, err := newLateRestore(dev, devTS)
			if err != nil {
				return err
			}
			defer late.free()
			run = func() error {
				if err := late.launch(st); err != nil {
					return err
				}
				return s.Run(st, devTS)
			}
		}
		if graph {
			g, err := st.Capture(cuda.CaptureGlobal, run)
			if err != nil {
				return fmt.Errorf("device, capturing a CUDA graph: %w", err)
			}
			defer g.Destroy()
			run = func() error { return g.Launch(st) }
		}
		if err := run(); err != nil {
			return fmt.Errorf("device: %w", err)
		}
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("device: %w", err)
		}
		back = make([]*tensor.Tensor, len(devTS))
		for i, d := range devTS {
			h, err := d.ToHost()
			if err != nil {
				return err
			}
			back[i] = h
		}
		return nil
	})
	return back, err
}

// load gives the device tensors devTS the case's bytes, copying each host
// tensor to dev where devTS holds nil and into the device tensor otherwise,
// and poisons the pure outputs.
func (s Spec) load(dev *cuda.Device, devTS []*tensor.Tensor) error {
	for i, t := range s.Tensors {
		if devTS[i] != nil {
			if err := devTS[i].CopyFrom(t); err != nil {
				return err
			}
			continue
		}
		d, err := t.ToDevice(dev)
		if err != nil {
			return err
		}
		devTS[i] = d
	}
	for _, i := range s.Poison {
		if err := devTS[i].Poison(); err != nil {
			return err
		}
	}
	return nil
}

// firstDiff is the offset of the first byte where a and b differ, or −1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
