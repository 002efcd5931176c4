package main

import (
	"fmt"

	"github.com/gokittens/kittens/bench"
)

// list prints every registered op: family, name, parity and benchmark case
// counts, and what it computes.
func (c *cli) list(args []string) int {
	fs := c.flags("list")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	ops := families().Ops()
	if len(ops) == 0 {
		fmt.Fprintln(c.stdout, "no ops registered")
		return exitOK
	}
	t := &bench.Table{Header: []string{"family", "op", "checks", "benches", "doc"}, Align: "llrrl"}
	for _, op := range ops {
		t.Add(op.Family, op.Name, fmt.Sprint(len(op.Checks)), fmt.Sprint(len(op.Benches)), op.Doc)
	}
	if err := t.WriteText(c.stdout); err != nil {
		return exitFail
	}
	return exitOK
}
