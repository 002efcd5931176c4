package jit

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gokittens/kittens/cuda"
)

var (
	// progressFn is what SetProgress set (nil: nothing).
	progressFn atomic.Pointer[func(done, total int)]
	// progressMu serializes the counting and reporting of every Prepare
	// batch, so that reports never overlap and each batch's done counts up.
	progressMu sync.Mutex
)

// SetProgress sets the function that Prepare reports to: after each kernel
// of a batch finishes building (from either cache or NVRTC, or failing),
// fn(done, total) is called with the kernels of that batch finished so far
// and the batch's size. The setting is process-wide, and nil (the default)
// reports nothing. Calls are serialized across the whole process, never
// concurrent, even where several batches build at once, and within a
// batch done counts up from 1 to total. Other builds go on while fn runs,
// but each waits for it before reporting its own end, so fn should return
// quickly (and must not call Prepare). A command sets it once, to draw a progress bar, say; library
// code leaves it alone.
func SetProgress(fn func(done, total int)) {
	if fn == nil {
		progressFn.Store(nil)
		return
	}
	progressFn.Store(&fn)
}

// Prepare builds many kernels for dev in parallel (one NVRTC compile per
// core), reporting each one done to the function SetProgress set, and
// returns the first error. A nil dev is an error (cuda.ErrNilDevice), with
// nothing built or reported.
func Prepare(dev *cuda.Device, ks []Kernel) error {
	if dev == nil {
		return errNoDevice
	}
	var (
		wg    sync.WaitGroup
		first error
		done  int
	)
	sem := make(chan struct{}, runtime.NumCPU())
	for _, k := range ks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := Get(dev, k)
			progressMu.Lock()
			defer progressMu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			done++
			if fn := progressFn.Load(); fn != nil {
				(*fn)(done, len(ks))
			}
		})
	}
	wg.Wait()
	return first
}
