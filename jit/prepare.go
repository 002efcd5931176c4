package jit

import (
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gokittens/kittens/cuda"
)

// progressDelay is how long compiling may run before a progress bar appears.
const progressDelay = 400 * time.Millisecond

// Prepare builds many kernels for dev in parallel (one NVRTC compile per core)
// and returns the first error. On a terminal, a progress bar shows once the
// work takes longer than a moment.
func Prepare(dev *cuda.Device, ks []Kernel) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		done  int
		bar   *progressbar.ProgressBar
	)
	start := time.Now()
	showBar := term.IsTerminal(int(os.Stderr.Fd()))
	sem := make(chan struct{}, runtime.NumCPU())
	for _, k := range ks {
		wg.Add(1)
		sem <- struct{}{}
		go func(k Kernel) {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := Get(dev, k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			done++
			if showBar && bar == nil && time.Since(start) > progressDelay {
				bar = progressbar.NewOptions(len(ks), progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("compiling kernels"), progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish())
				_ = bar.Set(done)
			} else if bar != nil {
				_ = bar.Add(1)
			}
		}(k)
	}
	wg.Wait()
	if bar != nil {
		_ = bar.Finish()
	}
	return first
}
