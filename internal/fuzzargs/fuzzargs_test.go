package fuzzargs

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gokittens/kittens/tensor"
)

// fakeTB records Fatalf instead of stopping the test, so that a check that
// must fail can be seen failing.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	if !f.failed {
		f.failed, f.msg = true, fmt.Sprintf(format, args...)
	}
}

func TestIn(t *testing.T) {
	in := NewIn([]byte{7, 255, 254, 0, 9, 2})
	got := []int{in.N(4), in.Rare(2), in.Dim(70, 1025), in.Dim(), in.Dim(), Pick(in, 10, 20, 30)}
	if want := []int{3, 2, 70, 3, 2, 30}; !slices.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
	// Past the end a plain In reads zeros, the plain options.
	if in.Byte() != 0 || in.Rare(16) != 0 || in.Dim(1, 2) != 3 || !in.One(5) {
		t.Error("past the end, NewIn does not read zeros")
	}
	// A seeded In reads the same bytes, then a tail fixed by the input.
	a, b := NewSeededIn([]byte{1, 2}), NewSeededIn([]byte{1, 2})
	for i := range 20 {
		if x, y := a.Byte(), b.Byte(); x != y || i < 2 && x != i+1 {
			t.Fatalf("byte %d: %d and %d", i, x, y)
		}
	}
	if s := Capped([]int{130, 130, 2}); s[0]*s[1]*s[2] > MaxElems {
		t.Errorf("Capped left %v", s)
	}
}

// TestChecks places an output over an input in the arena and checks that
// CheckWrites and CheckError pass and fail where they must.
func TestChecks(t *testing.T) {
	a := NewArena(NewIn(nil), 256, 1)
	x := a.At(0, tensor.F32, []int{2, 4}, []int{6, 1}) // rows of 4 in 6
	y := a.At(a.End(), tensor.F32, []int{2, 2}, []int{6, 1})
	own := a.Own("w", tensor.BF16, []int{3}, []int{1})
	if x == nil || y == nil || !slices.Equal(a.Made, []*tensor.Tensor{x, y, own}) {
		t.Fatal("the arena did not place the tensors")
	}
	a.Fill()
	// Writing y's elements passes; a gap of y, x or another root fails.
	y.SetFloat64s([]float64{1, 2, 3, 4})
	a.CheckWrites(t, "y's elements", y)
	for _, c := range []struct {
		name  string
		write func()
	}{
		{"a gap of x", func() { a.roots[0].t.Bytes()[4*4] ^= 1 }},
		{"x", func() { x.SetFloat64s(make([]float64, 8)) }},
		{"w", func() { own.Bytes()[0] ^= 1 }},
	} {
		a.Snapshot()
		c.write()
		tb := &fakeTB{TB: t}
		a.CheckWrites(tb, c.name, y)
		if !tb.failed {
			t.Errorf("writing %s passed CheckWrites", c.name)
		}
	}
	a.Snapshot()
	v := tensor.Validate("pkg.Op")
	v.Tensor("x", nil)
	err := v.Err()
	a.CheckError(t, "a nil x", err, "pkg", "x", "y")
	for _, c := range []struct {
		name string
		err  error
		pkg  string
		args []string
	}{
		{"another argument", err, "pkg", []string{"y"}},
		{"another package", err, "other", nil},
		{"no ArgError", errors.New("x is nil"), "pkg", nil},
		{"no argument", &tensor.ArgError{Op: "pkg.Op", Msg: "bad"}, "pkg", nil},
	} {
		tb := &fakeTB{TB: t}
		a.CheckError(tb, c.name, c.err, c.pkg, c.args...)
		if !tb.failed {
			t.Errorf("%s passed CheckError", c.name)
		}
	}
	// An error after a write fails.
	own.Bytes()[1] ^= 1
	tb := &fakeTB{TB: t}
	a.CheckError(tb, "a write", err, "pkg")
	if !tb.failed {
		t.Error("a write before an error passed CheckError")
	}
}

// TestCheck runs Check on an op that copies x to y, and on one that also
// writes past y.
func TestCheck(t *testing.T) {
	for _, bad := range []bool{false, true} {
		a := NewArena(NewIn(nil), 64, 2)
		x := a.Own("x", tensor.F32, []int{2, 1}, []int{1, 1})
		y := a.At(0, tensor.F32, []int{2, 1}, []int{2, 1}) // a gap after each row
		x.SetFloat64s([]float64{1, 2})
		op := func(y, x *tensor.Tensor) error {
			y.SetFloat64s(x.Float64s())
			if bad && y.Stride(0) == 2 {
				y.Bytes()[4] ^= 1
			}
			return nil
		}
		tb := &fakeTB{TB: t}
		a.Check(tb, Call{Pkg: "pkg", Args: []string{"x", "y"}, Outs: []*tensor.Tensor{y},
			Ref: func() ([][]byte, error) {
				yc := ZerosLike(y)
				err := op(yc, DenseCopy(x))
				return [][]byte{yc.Bytes()}, err
			},
			Run:      func() error { return op(y, x) },
			Accepted: func() bool { return true },
		})
		if tb.failed != bad {
			t.Errorf("writing past y: %v; Check failed: %v (%s)", bad, tb.failed, tb.msg)
		}
	}
}
