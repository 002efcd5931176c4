package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progress reports "[i/n] what" on stderr before each case: on a terminal
// as one line rewritten in place and cleared at the end, elsewhere (logs) as
// one line per case.
type progress struct {
	w     io.Writer
	n, i  int
	inTTY bool
}

func newProgress(w io.Writer, n int) *progress {
	return &progress{w: w, n: n, inTTY: isTerminal(w)}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// step announces the next case.
func (p *progress) step(what string) {
	p.i++
	if p.inTTY {
		fmt.Fprintf(p.w, "\r\x1b[K[%d/%d] %s", p.i, p.n, what)
		return
	}
	fmt.Fprintf(p.w, "[%d/%d] %s\n", p.i, p.n, what)
}

// done clears the line on a terminal.
func (p *progress) done() {
	if p.inTTY && p.i > 0 {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// progressDelay is how long a batch of kernel builds may run before its
// progress line appears.
const progressDelay = 400 * time.Millisecond

// compileProgress returns the function main hands jit.SetProgress when
// stderr is a terminal: once a batch of jit.Prepare has taken longer than
// delay, it draws "compiling kernels [done/total]" on w, one line
// rewritten in place, and clears it when the batch ends. jit serializes
// the calls.
func compileProgress(w io.Writer, delay time.Duration) func(done, total int) {
	var start time.Time
	shown := false
	return func(done, total int) {
		if done == 1 {
			start = time.Now()
		}
		switch {
		case done >= total:
			if shown {
				fmt.Fprint(w, "\r\x1b[K")
			}
			shown = false
		case shown || time.Since(start) >= delay:
			shown = true
			fmt.Fprintf(w, "\r\x1b[Kcompiling kernels [%d/%d]", done, total)
		}
	}
}
