package conv1d_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/conv1d/conv1dtest"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// TestTune times variants of the picked launch configuration
// (conv1d.Variants) on the benchmark cases, those whose name matches
// KITTENS_CONV1D_TUNE_CASES (a regexp) when it is set, and checks each
// variant's outputs against the first's: bf16 tolerance, conv states
// exact (cases of 1 GB and more are only timed). It runs only with
// KITTENS_CONV1D_TUNE=1. NOTES.md keeps what the sweeps decided.
func TestTune(t *testing.T) {
	if os.Getenv("KITTENS_CONV1D_TUNE") != "1" {
		t.Skip("set KITTENS_CONV1D_TUNE=1 to run")
	}
	dev := gputest.Device(t)
	only, err := regexp.Compile(os.Getenv("KITTENS_CONV1D_TUNE_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	gbs, err := bench.CopyBandwidth(dev)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("copy %.0f GB/s\n", gbs)
	for _, c := range conv1dtest.Benchmarks() {
		if !only.MatchString(c.Name) {
			continue
		}
		s := newTuneShape(t, dev, c)
		decode := c.Op == conv1dtest.OpUpdate || c.Op == conv1dtest.OpUpdateSplit
		for _, v := range conv1d.Variants(decode, max(c.SeqLen, 1)) {
			line, err := s.run(dev, v, gbs)
			if err != nil {
				t.Errorf("%s %s: %v", c.Name, v.Name, err)
				continue
			}
			fmt.Printf("%-36s %-14s %s\n", c.Name, v.Name, line)
		}
		s.free()
	}
}

// tuneSet is one input set of a benchmark case on the device.
type tuneSet struct {
	dev      []*tensor.Tensor
	pristine map[int]*tensor.Tensor // initial copies of the pools (updated in place)
}

// tuneShape is a benchmark case built on the device: enough input sets to
// touch three times the L2, like bench.Measure's rotation.
type tuneShape struct {
	bd   *conv1dtest.Built
	o    conv1d.Options
	sets []tuneSet
	ref  map[int][]byte // outputs of the first verified variant
}

func newTuneShape(t *testing.T, dev *cuda.Device, c conv1dtest.Case) *tuneShape {
	rng := rand.New(rand.NewPCG(7, 8))
	s := &tuneShape{bd: c.Build(rng, conv1dtest.TiledFill(rng)), o: conv1d.Options{SiLU: c.SiLU, AssumeValidIndices: true},
		ref: map[int][]byte{}}
	n := min(16, max(1, int((3*int64(dev.Props().L2Bytes)+s.bd.Bytes-1)/s.bd.Bytes)))
	toDev := func(h *tensor.Tensor) *tensor.Tensor {
		d, err := h.ToDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range n {
		set := tuneSet{pristine: map[int]*tensor.Tensor{}}
		for _, h := range s.bd.Tensors {
			set.dev = append(set.dev, toDev(h))
		}
		for _, i := range s.bd.Exact {
			set.pristine[i] = toDev(s.bd.Tensors[i])
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

// run verifies and times variant v: a line of its configuration, kernel
// resources, time, bandwidth (and its share of the copy's, gbs) and
// differences from the reference.
func (s *tuneShape) run(dev *cuda.Device, v conv1d.Variant, gbs float64) (string, error) {
	describe, restore := v.Use()
	defer restore()
	msg := ""
	if s.bd.Bytes < 1e9 {
		var err error
		if msg, err = s.verify(dev); err != nil {
			return "", err
		}
	}
	next := 0
	b := bench.Case{Bytes: s.bd.Bytes, New: func(*cuda.Device, *rand.Rand) (bench.Instance, error) {
		set := s.sets[next%len(s.sets)]
		next++
		return bench.Instance{Run: func(st *cuda.Stream) error { return s.bd.Call(st, set.dev, s.o) }}, nil
	}}
	r, err := bench.Measure(dev, b, bench.Options{MaxSets: len(s.sets)})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s  %8.2f µs %5.0f GB/s %5.1f%%  %s", describe(dev), r.MedianUS, r.GBs, 100*r.GBs/gbs, msg), nil
}

// verify poisons the outputs of set 0, restores its pools, runs once and
// compares with the stored reference (storing it when there is none):
// outputs within the bf16 tolerance, pools exact.
func (s *tuneShape) verify(dev *cuda.Device) (string, error) {
	st, set := dev.DefaultStream(), s.sets[0]
	for _, i := range s.bd.Outputs {
		if p, ok := set.pristine[i]; ok {
			if err := st.CopyDtoD(set.dev[i].Ptr(), p.Ptr(), p.SpanBytes()); err != nil {
				return "", err
			}
		} else if err := st.Memset8(set.dev[i].Ptr(), 0xFF, set.dev[i].SpanBytes()); err != nil {
			return "", err
		}
	}
	if err := s.bd.Call(st, set.dev, s.o); err != nil {
		return "", err
	}
	if err := st.Synchronize(); err != nil {
		return "", err
	}
	var msgs []string
	for _, i := range s.bd.Outputs {
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
		msgs = append(msgs, fmt.Sprintf("%s bad=%d maxdiff=%.3g", s.bd.Names[i], bad, maxd))
	}
	return strings.Join(msgs, " "), nil
}
