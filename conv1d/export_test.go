package conv1d

import (
	"fmt"

	"github.com/gokittens/kittens/cuda"
)

// Hooks for the external tests (package conv1d_test), which build their
// calls with conv1dtest.

// The kernel's limits, for the validation tests.
const (
	MaxStateLen = maxStateLen
	MaxSeqs     = maxSeqs
)

// setTune makes launches take f's configuration until restore is called.
func setTune(f func(p *plan, sh shape, c config) config) (restore func()) {
	tune = f
	return func() { tune = nil }
}

// ForceEvictLast makes every ring's bulk copies ask L2 to evict their lines
// last, which the picker keeps for calls larger than L2, until restore is
// called.
func ForceEvictLast() (restore func()) {
	return setTune(func(_ *plan, _ shape, c config) config {
		c.evictLast = c.ring > 0
		return c
	})
}

// ForceWide makes the register path (decode among it) move 16 bytes a
// thread under the register cap the picker gives that width, which it picks
// only for single-token decode over a deep grid, until restore is called.
func ForceWide() (restore func()) {
	return setTune(func(_ *plan, sh shape, c config) config {
		if c.ring == 0 {
			c.vec, c.minBlocks = min(sh.maxVec, maxVecBytes/sh.elemSize), wideDecodeMinBlocks
		}
		return c
	})
}

// Variant is a change to the picked launch configuration, for the tuning
// sweep (TestTune).
type Variant struct {
	Name string
	set  func(*config)
}

// Variants returns what TestTune times for prefill, or for decode of tokens
// tokens a sequence: the picked configuration first and last (to see the
// drift), the changes between.
func Variants(decode bool, tokens int) []Variant {
	picked := Variant{"picked", func(*config) {}}
	var vs []Variant
	switch {
	case !decode:
		vs = []Variant{
			{"registers c24", func(c *config) { c.ring, c.stages, c.chunk = 0, 0, 24 }},
			{"c24", func(c *config) { c.chunk = 24 }},
			{"c12", func(c *config) { c.chunk = 12 }},
			{"64 threads", func(c *config) { c.threads = 64 }},
			{"16x1", func(c *config) { c.ring, c.stages = 16, 1 }},
		}
	case tokens == 1:
		vs = []Variant{
			{"vec8 b7", func(c *config) { c.vec, c.minBlocks = 8, 7 }},
			{"vec8 b6", func(c *config) { c.vec, c.minBlocks = 8, 6 }},
			{"vec8 b5", func(c *config) { c.vec, c.minBlocks = 8, 5 }},
		}
	default:
		vs = []Variant{
			{"u4", func(c *config) { c.unroll = 4 }},
			{"u4 b8", func(c *config) { c.unroll, c.minBlocks = 4, decodeMinBlocks }},
			{"u1 b8", func(c *config) { c.unroll, c.minBlocks = 1, decodeMinBlocks }},
			{"64 threads", func(c *config) { c.threads = 64 }},
			{"no hints", func(c *config) { c.hints = false }},
		}
	}
	return append(append([]Variant{picked}, vs...), picked)
}

// Use makes launches take v's change until restore is called. describe
// then tells the configuration of the last launch and the registers and
// local memory a thread of its kernel takes on dev.
func (v Variant) Use() (describe func(dev *cuda.Device) string, restore func()) {
	var (
		used config
		key  kernelKey
	)
	restore = setTune(func(p *plan, _ shape, c config) config {
		v.set(&c)
		used, key = c, c.key(p.x.DType(), p.width, p.silu, p.mode)
		return c
	})
	describe = func(dev *cuda.Device) string {
		fn, err := kernels.Get(dev, nil, key)
		if err != nil {
			return fmt.Sprintf("%+v: %v", used, err)
		}
		regs, _ := fn.Attribute(cuda.FuncNumRegs)
		local, _ := fn.Attribute(cuda.FuncLocalSizeBytes)
		return fmt.Sprintf("%+v regs=%d local=%d", used, regs, local)
	}
	return describe, restore
}
