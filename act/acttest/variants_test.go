package acttest

import (
	"fmt"
	"testing"

	"github.com/gokittens/kittens/act"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// TestGatedVariants runs act.Gated for every activation, both layouts, the
// gate in either place and with and without the clamp, against the
// reference: on the GPU when there is one, otherwise the host path alone.
// Suite's ops reach only SiLU, GELU and GELU-tanh gates, and only halves
// for the gate second; the ReLU and tanh gates (tanh takes two items a
// thread, the only gated kernel that does) and the interleaved layout with
// the gate at the odd columns are the public API's too. Rows of d = 37 end
// in a partial vector when interleaved (16-byte rows: one row, or row
// strides of 80 and 40) and take single elements as halves; d = 40 takes
// 16-byte accesses in both layouts.
func TestGatedVariants(t *testing.T) {
	cases := []caseDef{
		{name: "d=37 1x74", shape: []int{1, 74}},
		{name: "d=37 5x74 strides 80,40", shape: []int{5, 74}, xs: []int{80, 1}, ys: []int{40, 1}},
		{name: "d=40 3x80", shape: []int{3, 80}},
	}
	kinds := []act.Kind{act.KindSiLU, act.KindGELU, act.KindGELUTanh, act.KindReLU, act.KindTanh}
	var checks []check.Case
	for _, kind := range kinds {
		for _, layout := range []act.Layout{act.Halves, act.Interleaved} {
			for _, second := range []bool{false, true} {
				o := act.GatedOptions{Kind: kind, Layout: layout, GateSecond: second}
				if (layout == act.Interleaved) != second {
					o.Limit = 2.5
				}
				for _, dt := range dtypes {
					for _, c := range cases {
						ch := parity(c, dt, true, func(s *cuda.Stream, y, x *tensor.Tensor) error { return act.Gated(s, y, x, o) })
						ch.Name = fmt.Sprintf("%v/%v/gateSecond=%v/limit=%g/%s", kind, layout, second, o.Limit, ch.Name)
						checks = append(checks, ch)
					}
				}
			}
		}
	}
	gputest.Run(t, checks)
}
