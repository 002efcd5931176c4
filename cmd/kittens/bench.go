package main

import (
	"fmt"
	"io"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
)

// bench times every selected op: on the GPU each benchmark case with
// bench.Measure after measuring the copy ceiling (and, with -vs torch,
// PyTorch on the same cases in the same run); without a GPU the host path
// of each parity case. A case that failed, ours or PyTorch's, fails the
// command.
func (c *cli) bench(args []string) int {
	fs := c.flags("bench")
	sel := selectionFlags(fs)
	vs := fs.String("vs", "", `also time PyTorch eager and torch.compile on the same cases ("torch")`)
	write := fs.String("write", "", "also write the results as markdown to this file (results/<gpu>/BENCH.md)")
	partial := partialFlag(fs)
	jsonPath := fs.String("json", "", "also write every number as JSON to this file (results/<gpu>/runs/NAME.json; "+
		"kittens report merges such runs, which may each hold part of the cases)")
	runs := fs.Int("runs", 0, "timed launches per case (default 200; 3 host runs on the CPU path)")
	graph := fs.Int("graph", 0, "time launches inside CUDA graphs of this many, as serving engines run decode (0: one launch at a time)")
	evictLast := fs.Bool("evict-last", false, "let large launches read under an L2 evict-last policy (cuda.Device.SetL2EvictLast; off by default)")
	dependent := fs.Bool("pdl", false, "with -graph: capture our kernels as programmatic dependent launches (PDL; compute capability 9.0+)")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if *runs < 0 {
		fmt.Fprintf(c.stderr, "kittens bench: -runs %d: it must be ≥ 1 (or 0 for the default)\n", *runs)
		return exitUsage
	}
	if *graph < 0 {
		fmt.Fprintf(c.stderr, "kittens bench: -graph %d: it must be ≥ 1 (or 0 for none)\n", *graph)
		return exitUsage
	}
	if *dependent && *graph == 0 {
		fmt.Fprintln(c.stderr, "kittens bench: -pdl needs -graph: dependent launches overlap inside a graph")
		return exitUsage
	}
	if *vs != "" && *vs != "torch" {
		fmt.Fprintf(c.stderr, "kittens bench: -vs %q: only \"torch\" is known\n", *vs)
		return exitUsage
	}
	if !c.checkOutputs("bench", map[string]string{"write": *write, "json": *jsonPath}) {
		return exitUsage
	}
	ops, dev, ok := c.resolve(fs, sel, true)
	if !ok || c.refusePartial("bench", *write, *partial, sel, dev) {
		return exitUsage
	}
	rep := &bench.Report{Env: bench.Describe(dev)}
	if dev != nil {
		rep.Env.Graph, rep.Env.Dependent, rep.Env.L2EvictLast = *graph, *dependent, *evictLast
		dev.SetL2EvictLast(*evictLast)
		if p := dev.Props(); *dependent && !p.DependentLaunch() {
			fmt.Fprintf(c.stderr, "kittens bench: -pdl: %s is compute capability %d.%d; dependent launches need 9.0\n", p.Name, p.Major, p.Minor)
			return exitUsage
		}
	}
	status := exitOK
	if dev == nil {
		rep.Entries = benchHost(ops, *runs, c.stderr)
		if *vs != "" {
			fmt.Fprintln(c.stderr, "CPU path: the PyTorch comparison is skipped")
		}
	} else {
		gbs, err := bench.CopyBandwidth(dev)
		if err != nil {
			fmt.Fprintln(c.stderr, "kittens bench: copy bandwidth:", err)
			status = exitFail
		}
		rep.Env.CopyGBs = gbs
		opt := bench.Options{Runs: *runs, Graph: *graph, Dependent: *dependent}
		var lf bench.LaunchFloor
		floor := func() float64 {
			r, err := bench.Floor(dev, opt)
			if err != nil {
				fmt.Fprintln(c.stderr, "kittens bench:", err)
				status = exitFail
			}
			return r.MedianUS
		}
		lf.Ours.StartUS = floor()
		var copied bool
		if rep.Entries, copied = benchDevice(dev, ops, opt, c.stderr); !copied {
			status = exitFail
		}
		lf.Ours.EndUS = floor()
		if *vs == "torch" && compareTorch(ops, rep.Entries, opt, &lf.Torch, c.stderr) != nil {
			status = exitFail
		}
		rep.Env.Floors = []bench.LaunchFloor{lf}
	}
	if rep.Failed() { // ours or PyTorch's: the table lacks a time
		status = exitFail
	}
	if !c.emit("bench", rep.WriteText, output{*write, rep.WriteMarkdown}, output{*jsonPath, rep.WriteJSON}) {
		status = exitFail
	}
	return status
}

// sameCopyMin is the smallest case that is also compared with a copy of
// its own size: below it both are mostly launch latency.
const sameCopyMin = 16 << 20

// benchDevice measures every benchmark case of ops on dev, after warming
// them all together (warmCases), and for cases of
// sameCopyMin bytes or more, unless they run in CUDA graphs, a copy that
// moves as many bytes (once per size
// that copy rounds to, bench.CopyBytes). copied is false when such a copy
// failed: the cases of its size then lack the figure the copy targets are
// counted against, which fails the command as a failed case does.
func benchDevice(dev *cuda.Device, ops []*suite.Op, opt bench.Options, stderr io.Writer) (out []bench.Entry, copied bool) {
	copied = true
	copies := map[int64]float64{}
	warmCases(ops, benchesOf, stderr, func(bs []bench.Case, done func()) {
		bench.WarmAll(dev, bs, opt.Dependent, done)
	})
	eachCase(ops, benchesOf, benchName, stderr, func(op *suite.Op, b bench.Case) {
		r, err := bench.Measure(dev, b, opt)
		e := entry(op, b.Name, r, err)
		e.Bytes, e.Flops, e.Goal = b.Bytes, b.Flops, b.Goal
		if b.Bytes >= sameCopyMin && opt.Graph == 0 { // a lone copy says nothing of launches in a graph
			size := bench.CopyBytes(b.Bytes)
			if _, ok := copies[size]; !ok {
				gbs, err := bench.CopyAt(dev, b.Bytes)
				if err != nil {
					fmt.Fprintf(stderr, "kittens bench: copy of %d bytes: %v\n", b.Bytes, err)
					copied = false
				}
				copies[size] = gbs
			}
			e.SameCopyGBs = copies[size]
		}
		out = append(out, e)
	})
	return out, copied
}

// benchHost times the host path of every parity case of ops.
func benchHost(ops []*suite.Op, runs int, stderr io.Writer) []bench.Entry {
	var out []bench.Entry
	eachCase(ops, checksOf, checkName, stderr, func(op *suite.Op, cs check.Case) {
		r, err := bench.MeasureHost(cs, runs)
		out = append(out, entry(op, cs.Name, r, err))
	})
	return out
}

// entry is the report entry of one measured case of op.
func entry(op *suite.Op, name string, r bench.Result, err error) bench.Entry {
	e := bench.Entry{Family: op.Family, Op: op.Name, Case: name, Result: r}
	if err != nil {
		e.Err = err.Error()
	}
	return e
}

// compareTorch runs PyTorch on every case of ops that has a TorchCase and
// that we measured (bench.TorchRequestFor), and attaches the results to
// entries, which benchDevice filled in the same order. PyTorch's process
// also times its launch floor before the first case and after the last,
// into floor (see bench.FloorRequest). An error (no Python, no torch, a
// crash) is reported on stderr and returned; the entries keep what came
// back.
func compareTorch(ops []*suite.Op, entries []bench.Entry, opt bench.Options, floor *bench.FloorSpan, stderr io.Writer) error {
	const startID, endID = "launch floor, start", "launch floor, end"
	reqs := []bench.TorchRequest{bench.FloorRequest(startID, opt)}
	index := map[string]int{}
	i := 0
	for _, op := range ops {
		for _, b := range op.Benches {
			id := op.Name + "/" + b.Name
			if req, ok := bench.TorchRequestFor(id, b, entries[i].Result); ok {
				reqs = append(reqs, req)
				index[id] = i
			}
			i++
		}
	}
	if len(index) == 0 {
		return nil
	}
	reqs = append(reqs, bench.FloorRequest(endID, opt))
	fmt.Fprintf(stderr, "timing %d cases with PyTorch (eager and torch.compile)\n", len(index))
	res, err := bench.Torch(families().Torch(), reqs)
	floor.StartUS, floor.EndUS = res[startID].EagerUS, res[endID].EagerUS
	for _, id := range []string{startID, endID} {
		if e := res[id].Error; e != "" {
			fmt.Fprintf(stderr, "kittens bench: PyTorch's %s: %s\n", id, e)
		}
	}
	for id, r := range res {
		if i, ok := index[id]; ok {
			entries[i].Torch = &r
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kittens bench: -vs torch:", err)
	}
	return err
}
