package check

import (
	_ "embed"
	"encoding/binary"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed late.cu
var lateSrc string

var lateKernel = jit.Kernel{File: "check/late.cu", Source: lateSrc, Entry: "restore_late", Dependent: true}

// lateNS is how long restore_late holds the GPU before it writes: far
// longer than the next kernel takes to launch.
const lateNS = 20_000

// lateRestore is a queued restore_late over a case's device tensors: it
// holds their starting bytes, and the table of stretches to copy back.
type lateRestore struct {
	dev          *cuda.Device
	fn           *cuda.Function
	saved, table cuda.DevicePtr
	n            int
}

// newLateRestore saves the bytes of every tensor of ts (their whole spans)
// on dev and then scrambles the tensors with 0xFF bytes, so that only a
// launch of the returned restore gives them back.
func newLateRestore(dev *cuda.Device, ts []*tensor.Tensor) (*lateRestore, error) {
	fn, err := jit.Get(dev, lateKernel)
	if err != nil {
		return nil, err
	}
	l := &lateRestore{dev: dev, fn: fn}
	total := 0
	for _, t := range ts {
		total += intmath.RoundUp(t.SpanBytes(), 16)
	}
	if l.saved, err = dev.Alloc(max(total, 16)); err != nil {
		return nil, err
	}
	if l.table, err = dev.Alloc(24 * max(len(ts), 1)); err != nil {
		l.free()
		return nil, err
	}
	table := make([]byte, 0, 24*len(ts))
	off := 0
	for _, t := range ts {
		n := t.SpanBytes()
		if n == 0 {
			continue
		}
		src := l.saved + cuda.DevicePtr(off)
		if err := dev.CopyDtoD(src, t.Ptr(), n); err != nil {
			l.free()
			return nil, err
		}
		table = binary.LittleEndian.AppendUint64(table, uint64(t.Ptr()))
		table = binary.LittleEndian.AppendUint64(table, uint64(src))
		table = binary.LittleEndian.AppendUint64(table, uint64(n))
		off += intmath.RoundUp(n, 16)
		l.n++
	}
	if err := dev.CopyHtoD(l.table, table); err != nil {
		l.free()
		return nil, err
	}
	for _, t := range ts {
		if err := t.Poison(); err != nil {
			l.free()
			return nil, err
		}
	}
	return l, nil
}

// launch queues the restore on s.
func (l *lateRestore) launch(s *cuda.Stream) error {
	return l.fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(l.dev.Props().SMs), Block: cuda.D1(256), Stream: s},
		cuda.NewArgs().Ptr(l.table).I32(int32(l.n)).I64(lateNS))
}

// free releases what newLateRestore allocated.
func (l *lateRestore) free() {
	for _, p := range []cuda.DevicePtr{l.saved, l.table} {
		if p != 0 {
			l.dev.Free(p)
		}
	}
}
