// Command kittens inspects, checks and benchmarks the library's kernels.
//
//	kittens info                      the driver, NVRTC and GPU this machine has
//	kittens list                      every registered op and its cases
//	kittens check [-op RE] [-cpu] [-write KERNELS.md]
//	                                  parity of every op with its CPU reference
//	kittens bench [-op RE] [-cpu] [-vs torch] [-write BENCH.md] [-json FILE] [-runs N]
//	                                  time every op, optionally beside PyTorch
//	kittens report [-write BENCH.md] RUN.json...
//	                                  merge bench runs split to fit a time limit
//
// Without a GPU (or with -cpu), check and bench run the CPU path (the host
// reference of every parity case) and say so. Results go to stdout, progress to stderr.
// The exit status is 1 when a case fails, 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/gokittens/kittens/cuda"
	_ "github.com/gokittens/kittens/ops" // every kernel family registers its ops
	"github.com/gokittens/kittens/registry"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a case failed or could not run
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// cli is one invocation: where results and progress go.
type cli struct {
	stdout, stderr io.Writer
}

// command is one subcommand.
type command struct {
	name, args, doc string
	run             func(c *cli, args []string) int
}

var commands = []command{
	{"info", "", "the driver, NVRTC, GPU and kernel cache of this machine", (*cli).info},
	{"list", "", "every registered op with its parity and benchmark cases", (*cli).list},
	{"check", "[-op RE] [-cpu] [-write FILE]", "run every op's parity cases against the CPU reference", (*cli).check},
	{"bench", "[-op RE] [-cpu] [-vs torch] [-write FILE] [-json FILE] [-runs N]", "time every op's benchmark cases", (*cli).bench},
	{"report", "[-write FILE] RUN.json...", "merge the JSON of several bench runs into one report", (*cli).report},
}

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		c.usage()
		return exitUsage
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			return cmd.run(c, args[1:])
		}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		c.usage()
		return exitOK
	}
	fmt.Fprintf(stderr, "kittens: unknown command %q\n", args[0])
	c.usage()
	return exitUsage
}

func (c *cli) usage() {
	fmt.Fprintln(c.stderr, "usage: kittens <command> [flags]")
	fmt.Fprintln(c.stderr)
	for _, cmd := range commands {
		fmt.Fprintf(c.stderr, "  %s\n      %s\n", strings.TrimSpace("kittens "+cmd.name+" "+cmd.args), cmd.doc)
	}
}

// flags returns a flag set for a subcommand that reports errors to stderr.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kittens "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

// parse parses a subcommand's flags; it returns false (after saying why)
// on an error or when positional arguments are left.
func (c *cli) parse(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return false
	}
	return true
}

// selection holds the flags that pick what check and bench run on.
type selection struct {
	pattern *string
	cases   *string
	cpu     *bool
}

// selectionFlags adds -op, -case and -cpu to fs.
func selectionFlags(fs *flag.FlagSet) selection {
	return selection{
		pattern: fs.String("op", "", "run only ops whose name or family/name matches this regular expression (e.g. ^norm/)"),
		cases:   fs.String("case", "", "run only the cases whose name matches this regular expression (e.g. '^1x7168 ')"),
		cpu:     fs.Bool("cpu", false, "run the CPU path even when a GPU is present"),
	}
}

// resolve returns the selected ops and the device to run them on (nil: the
// CPU path). It returns false after reporting a pattern that is no use.
func (c *cli) resolve(fs *flag.FlagSet, sel selection) ([]*registry.Op, *cuda.Device, bool) {
	ops, err := selectOps(*sel.pattern, *sel.cases)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
		return nil, nil, false
	}
	dev := c.device(*sel.cpu)
	if dev != nil {
		// Build the selected families' kernels up front, in parallel; what a
		// family does not list compiles on first use.
		var fams []string
		for _, op := range ops {
			fams = append(fams, op.Family)
		}
		if err := registry.Prepare(dev, fams); err != nil {
			fmt.Fprintf(c.stderr, "%s: compiling kernels: %v\n", fs.Name(), err)
		}
	}
	return ops, dev, true
}

// selectOps returns the registered ops whose name or family/name matches
// pattern (all when it is empty), each with only its check and benchmark
// cases whose names match casePattern (all when it is empty; an op left
// with no case is dropped). A pattern that selects nothing is an error.
func selectOps(pattern, casePattern string) ([]*registry.Op, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-op: %w", err)
	}
	caseRe, err := regexp.Compile(casePattern)
	if err != nil {
		return nil, fmt.Errorf("-case: %w", err)
	}
	var out []*registry.Op
	named := 0
	for _, op := range registry.All() {
		if !re.MatchString(op.Name) && !re.MatchString(op.Family+"/"+op.Name) {
			continue
		}
		named++
		if casePattern != "" {
			sel := *op
			sel.Checks = matching(op.Checks, checkName, caseRe)
			sel.Benches = matching(op.Benches, benchName, caseRe)
			if len(sel.Checks)+len(sel.Benches) == 0 {
				continue
			}
			op = &sel
		}
		out = append(out, op)
	}
	switch {
	case named == 0 && pattern != "":
		return nil, fmt.Errorf("-op %q matches no registered op", pattern)
	case len(out) == 0 && casePattern != "":
		return nil, fmt.Errorf("-case %q matches no case of the selected ops", casePattern)
	}
	return out, nil
}

// matching returns the cases whose name matches re.
func matching[C any](cases []C, name func(C) string, re *regexp.Regexp) []C {
	var out []C
	for _, c := range cases {
		if re.MatchString(name(c)) {
			out = append(out, c)
		}
	}
	return out
}

// device opens GPU 0 unless cpu is set. Without one it says so on stdout
// and returns nil: the caller runs the CPU path.
func (c *cli) device(cpu bool) *cuda.Device {
	if cpu {
		fmt.Fprintln(c.stdout, "-cpu: running the CPU path (host reference) only")
		return nil
	}
	dev, err := cuda.Default()
	if err != nil {
		fmt.Fprintf(c.stdout, "no GPU (%v): running the CPU path (host reference) only\n", err)
		return nil
	}
	return dev
}

// eachCase calls fn on every case of ops (cases lists an op's), announcing
// each on stderr first.
func eachCase[C any](ops []*registry.Op, cases func(*registry.Op) []C, name func(C) string, stderr io.Writer,
	fn func(*registry.Op, C)) {
	n := 0
	for _, op := range ops {
		n += len(cases(op))
	}
	p := newProgress(stderr, n)
	defer p.done()
	for _, op := range ops {
		for _, cs := range cases(op) {
			p.step(op.Name + " " + name(cs))
			fn(op, cs)
		}
	}
}

// Accessors of an op's cases for eachCase.
func checksOf(op *registry.Op) []registry.Check  { return op.Checks }
func benchesOf(op *registry.Op) []registry.Bench { return op.Benches }
func checkName(c registry.Check) string          { return c.Name }
func benchName(b registry.Bench) string          { return b.Name }

// writeFile writes a report through fn to path.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = fn(f)
	return errors.Join(err, f.Close())
}
