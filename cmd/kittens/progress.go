package main

import (
	"fmt"
	"io"
	"os"

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
	f, ok := w.(*os.File)
	return &progress{w: w, n: n, inTTY: ok && term.IsTerminal(int(f.Fd()))}
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
