package fuzzargs

import (
	"bytes"
	"testing"

	"github.com/gokittens/kittens/tensor"
)

// Call is one fuzzed call of an op whose model is "dense copies": the op
// on contiguous copies of the arguments is the reference.
type Call struct {
	Pkg  string           // the op's package, which its errors must name
	Args []string         // the op's argument names, one of which an error must name
	Outs []*tensor.Tensor // what the op writes (nil ones allowed)
	// Ref calls the op on dense copies of the arguments and returns the
	// bits of its outputs, in the order of Outs.
	Ref func() ([][]byte, error)
	// Run is the call under test.
	Run func() error
	// Accepted reports whether the call's layouts and aliasing are ones
	// the op's documentation accepts: where Ref passes, Run must pass too.
	Accepted func() bool
}

// Check takes the Snapshot, runs c.Ref and then c.Run, and checks the
// op's promises, returning Run's error. An error must pass CheckError,
// and where Ref passed, the call must not be Accepted. A success must
// pass CheckWrites with c.Outs, Ref must pass too, and the outputs'
// elements must hold Ref's bits.
func (a *Arena) Check(tb testing.TB, c Call) error {
	tb.Helper()
	a.Snapshot()
	want, refErr := c.Ref()
	err := c.Run()
	if err != nil {
		a.CheckError(tb, "the call", err, c.Pkg, c.Args...)
		if refErr == nil && c.Accepted() {
			tb.Fatalf("the call failed (%v) though its layouts and aliasing are valid and dense copies pass", err)
		}
		return err
	}
	a.CheckWrites(tb, "the call succeeded, yet", c.Outs...)
	if refErr != nil {
		tb.Fatalf("the call succeeded, the same call on dense copies failed: %v", refErr)
		return nil
	}
	for i, o := range c.Outs {
		if got := ElemBytes(o); !bytes.Equal(got, want[i]) {
			tb.Fatalf("output %d (%s) holds\n%x,\ndense copies give\n%x", i, a.Desc(o), got, want[i])
		}
	}
	return nil
}

// AddRandomSeeds adds the empty input and n byte strings of 8 to 63 bytes
// drawn from generators seeded 0 to n-1: inputs of NewSeededIn.
func AddRandomSeeds(f *testing.F, n int) {
	f.Add([]byte{})
	for seed := range uint64(n) {
		rng := tensor.SeededRNG(seed)
		b := make([]byte, 8+rng.IntN(56))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
}
