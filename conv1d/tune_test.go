package conv1d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// variant is a change to the picked launch configuration.
type variant struct {
	name string
	set  func(*config)
}

// tuneSet is one input set of a benchmark case on the device.
type tuneSet struct {
	dev      []*tensor.Tensor
	pristine map[int]*tensor.Tensor // initial copies of the pools (updated in place)
}

// tuneShape is a benchmark case built on the device: enough input sets to
// touch three times the L2, like bench.Measure's rotation.
type tuneShape struct {
	c    testCase
	bd   *built
	sets []tuneSet
	ref  map[int][]byte // outputs of the first verified variant
}

func newTuneShape(t *testing.T, dev *cuda.Device, c testCase) *tuneShape {
	rng := rand.New(rand.NewPCG(7, 8))
	s := &tuneShape{c: c, bd: c.build(rng, tiledFill(rng)), ref: map[int][]byte{}}
	n := min(16, max(1, int((3*int64(dev.Props().L2Bytes)+s.bd.bytes-1)/s.bd.bytes)))
	for range n {
		set := tuneSet{pristine: map[int]*tensor.Tensor{}}
		for _, h := range s.bd.ts {
			d, err := h.ToDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			set.dev = append(set.dev, d)
		}
		for _, i := range s.bd.exact {
			d, err := s.bd.ts[i].ToDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			set.pristine[i] = d
		}
		s.sets = append(s.sets, set)
	}
	return s
}

func (s *tuneShape) free() {
	for _, set := range s.sets {
		for _, d := range set.dev {
			d.Free()
		}
		for _, d := range set.pristine {
			d.Free()
		}
	}
}

// verify poisons the outputs of set 0, restores its pools, runs once and
// compares with the stored reference (storing it when there is none):
// outputs within the bf16 tolerance, pools exact.
func (s *tuneShape) verify(dev *cuda.Device, o Options) (string, error) {
	st, set := dev.DefaultStream(), s.sets[0]
	for _, i := range s.bd.outputs {
		if p, ok := set.pristine[i]; ok {
			if err := st.CopyDtoD(set.dev[i].Ptr(), p.Ptr(), p.SpanBytes()); err != nil {
				return "", err
			}
		} else if err := st.Memset8(set.dev[i].Ptr(), 0xFF, set.dev[i].SpanBytes()); err != nil {
			return "", err
		}
	}
	if err := s.bd.call(st, set.dev, o); err != nil {
		return "", err
	}
	if err := st.Synchronize(); err != nil {
		return "", err
	}
	var msgs []string
	for _, i := range s.bd.outputs {
		h, err := set.dev[i].ToHost()
		if err != nil {
			return "", err
		}
		got := h.Bytes()
		want, ok := s.ref[i]
		if !ok {
			s.ref[i] = append([]byte(nil), got...)
			continue
		}
		_, exact := set.pristine[i]
		bad, maxd := 0, 0.0
		for j := 0; j+1 < len(got); j += 2 {
			g := float64(math.Float32frombits(uint32(got[j])<<16 | uint32(got[j+1])<<24))
			w := float64(math.Float32frombits(uint32(want[j])<<16 | uint32(want[j+1])<<24))
			d := math.Abs(g - w)
			if exact && (got[j] != want[j] || got[j+1] != want[j+1]) || math.IsNaN(g) || d > 1e-2+1.6e-2*math.Abs(w) {
				bad++
			}
			if !math.IsNaN(d) {
				maxd = max(maxd, d)
			}
		}
		msgs = append(msgs, fmt.Sprintf("%s bad=%d maxdiff=%.3g", s.bd.names[i], bad, maxd))
	}
	return strings.Join(msgs, " "), nil
}

func (s *tuneShape) measure(dev *cuda.Device, o Options) (bench.Result, error) {
	next := 0
	b := bench.Case{Bytes: s.bd.bytes, New: func(*cuda.Device, *rand.Rand) (bench.Instance, error) {
		set := s.sets[next%len(s.sets)]
		next++
		return bench.Instance{Run: func(st *cuda.Stream) error { return s.bd.call(st, set.dev, o) }}, nil
	}}
	return bench.Measure(dev, b, bench.Options{MaxSets: len(s.sets)})
}

// TestTune is for tuning and runs only with KITTENS_CONV1D_TUNE=1: it times
// variants of the picked configuration on the benchmark shapes (those whose
// name matches KITTENS_CONV1D_TUNE_CASES, a regexp, when it is set),
// checking each output against the picked configuration's (bf16 tolerance;
// conv states exact).
//
// What the sweeps on an H200 showed is in NOTES.md.
func TestTune(t *testing.T) {
	if os.Getenv("KITTENS_CONV1D_TUNE") != "1" {
		t.Skip("set KITTENS_CONV1D_TUNE=1 to run")
	}
	dev := gputest.Device(t)
	defer func() { tune = nil }()
	gbs, err := bench.CopyBandwidth(dev)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("copy %.0f GB/s\n", gbs)

	picked := variant{"picked", func(*config) {}}
	prefill := []variant{picked,
		{"registers c24", func(c *config) { c.ring, c.stages, c.chunk = 0, 0, 24 }},
		{"c24", func(c *config) { c.chunk = 24 }},
		{"c12", func(c *config) { c.chunk = 12 }},
		{"64 threads", func(c *config) { c.threads = 64 }},
		{"16x1", func(c *config) { c.ring, c.stages = 16, 1 }},
		picked,
	}
	decode := []variant{picked,
		{"vec8 b7", func(c *config) { c.vec, c.minBlocks = 8, 7 }},
		{"vec8 b6", func(c *config) { c.vec, c.minBlocks = 8, 6 }},
		{"vec8 b5", func(c *config) { c.vec, c.minBlocks = 8, 5 }},
		picked,
	}
	multiToken := []variant{picked,
		{"u4", func(c *config) { c.unroll = 4 }},
		{"u4 b8", func(c *config) { c.unroll, c.minBlocks = 4, decodeMinBlocks }},
		{"u1 b8", func(c *config) { c.unroll, c.minBlocks = 1, decodeMinBlocks }},
		{"64 threads", func(c *config) { c.threads = 64 }},
		{"no hints", func(c *config) { c.hints = false }},
		picked,
	}
	fwd := func(name string, lens []int, init float64) testCase {
		return testCase{name: name, op: opForward, dt: bf16, width: 4, dim: qwenDim, lens: lens, nSlots: 2 * len(lens), initShare: init, silu: true}
	}
	upd := func(b int) testCase {
		return testCase{name: fmt.Sprintf("B%d", b), op: opUpdate, dt: bf16, width: 4, dim: qwenDim, batch: b, nSlots: 2 * b, silu: true, noBias: true}
	}
	spec := func(b int) testCase { c := upd(b).inMode(modeSpec); c.name += "spec4"; return c }
	circular := func(b int) testCase { c := upd(b).inMode(modeCircular); c.name += "circ"; return c }
	only, err := regexp.Compile(os.Getenv("KITTENS_CONV1D_TUNE_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c        testCase
		variants []variant
	}{
		{fwd("1x4096", []int{4096}, 0), prefill},
		{fwd("1x32768", []int{32768}, 0), prefill},
		{fwd("8seqs", mixedLens, 0.25), prefill},
		{upd(1), decode},
		{upd(32), decode},
		{upd(256), decode},
		{spec(32), multiToken},
		{spec(256), multiToken},
		{circular(256), decode},
	}
	o := Options{SiLU: true, AssumeValidIndices: true}
	for _, tc := range cases {
		if !only.MatchString(tc.c.name) {
			continue
		}
		s := newTuneShape(t, dev, tc.c)
		for _, v := range tc.variants {
			var used config
			tune = func(_ shape, c config) config { v.set(&c); used = c; return c }
			msg := ""
			if tc.c.name != "1x32768" { // 1 GB: verified through the smaller shapes
				if msg, err = s.verify(dev, o); err != nil {
					t.Errorf("%s %s: %v", tc.c.name, v.name, err)
					continue
				}
			}
			r, err := s.measure(dev, o)
			if err != nil {
				t.Errorf("%s %s: %v", tc.c.name, v.name, err)
				continue
			}
			fn, err := kernels.Get(dev, nil, used.spec(bf16, 4, true, tc.c.mode()))
			if err != nil {
				t.Fatal(err)
			}
			regs, _ := fn.Attribute(cuda.FuncNumRegs)
			local, _ := fn.Attribute(cuda.FuncLocalSizeBytes)
			fmt.Printf("%-8s %-18s %+v regs=%d local=%d  %8.2f µs %5.0f GB/s %5.1f%%  %s\n", tc.c.name, v.name, used, regs, local,
				r.MedianUS, r.GBs, 100*r.GBs/gbs, msg)
		}
		s.free()
	}
}
