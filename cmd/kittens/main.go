// Command kittens inspects, checks and benchmarks the library's kernels.
//
//	kittens info                      the driver, NVRTC and GPU this machine has
//	kittens list                      every registered op: its case counts and what it computes
//	kittens check [-op RE] [-case RE] [-cpu] [-write FILE] [-partial]
//	                                  parity of every op with its CPU reference
//	kittens bench [-op RE] [-case RE] [-cpu] [-vs torch] [-write FILE] [-partial] [-json FILE] [-runs N]
//	              [-graph N] [-pdl] [-evict-last]
//	                                  time every benchmark case, optionally beside PyTorch
//	kittens report [-write FILE] [-status DIR] RUN.json...
//	                                  merge bench runs split to fit a time limit or repeated;
//	                                  -status writes DIR/STATUS.md and DIR/roofline.svg
//
// Generated files live in one folder per GPU: results/h100/ and
// results/h200/ hold KERNELS.md (check -write), BENCH.md (report -write of
// runs/*.json from bench -json), the graph tables, STATUS.md and
// roofline.svg (report -status).
//
// Without a GPU (or with -cpu), check and bench run the CPU path (the host
// reference of every parity case) and say so on stderr. -case picks cases
// of the kind the command runs: parity cases for check and for bench on
// the CPU path, benchmark cases for bench on a GPU. Results go to stdout,
// progress and notices to stderr; -write, -json and -status files are
// written even when stdout fails, each whole or not at all, and their
// folders are checked before the run starts. -write refuses to write a
// table of the CPU path or of part of the cases (-op, -case), which would
// replace a full GPU table, unless -partial is given.
//
// The exit status is 1 when a case fails or could not run, on either side
// of a PyTorch comparison (bench -vs torch, and report of such runs: the
// table then lacks a time), or when an output could not be written; 2 on a
// usage error and on a pattern that selects no case of the command; 0
// after -h (kittens -h, kittens help and every command's -h).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/suite"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a case failed or could not run
	exitUsage = 2
)

func main() {
	if isTerminal(os.Stderr) {
		jit.SetProgress(compileProgress(os.Stderr, progressDelay))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// families is the list of every family's cases the commands run on; the
// command's tests add a family of test ops to it.
var families = registry.Families

// cli is one invocation: where results and progress go.
type cli struct {
	stdout, stderr io.Writer
}

// command is one subcommand.
type command struct {
	name, args, doc string
	run             func(c *cli, args []string) int
}

// commands are the subcommands, in the order usage lists them. (Set in
// init: each command's flags read the list for its usage.)
var commands []command

func init() {
	commands = []command{
		{"info", "", "the driver, NVRTC, GPU and kernel cache of this machine", (*cli).info},
		{"list", "", "every registered op: how many parity and benchmark cases it has, and what it computes", (*cli).list},
		{"check", "[-op RE] [-case RE] [-cpu] [-write FILE] [-partial]", "run every op's parity cases against the CPU reference", (*cli).check},
		{"bench", "[-op RE] [-case RE] [-cpu] [-vs torch] [-write FILE] [-partial] [-json FILE] [-runs N] [-graph N] [-pdl] [-evict-last]",
			"time every op's benchmark cases (without a GPU: the host path of its parity cases)", (*cli).bench},
		{"report", "[-write FILE] [-status DIR] RUN.json...",
			"merge the JSON of several bench runs into one report; -status also writes DIR/STATUS.md and DIR/roofline.svg", (*cli).report},
	}
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
	fmt.Fprintln(c.stderr, "\nkittens <command> -h describes a command's flags.")
}

// flags returns the flag set of subcommand name, which reports errors to
// stderr and whose usage (-h, or a bad flag) is the command's line, what
// it does and its flags.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kittens "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	i := slices.IndexFunc(commands, func(cmd command) bool { return cmd.name == name })
	fs.Usage = func() {
		cmd := commands[i]
		fmt.Fprintf(c.stderr, "usage: %s\n\n%s.\n", strings.TrimSpace("kittens "+cmd.name+" "+cmd.args), cmd.doc)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(c.stderr, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses a subcommand's flags. It returns false with the exit
// status when the command is to stop: 0 after -h (the usage printed), 2
// on a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// parse parses the flags of a subcommand that takes no other arguments, as
// parseFlags does; a positional argument left is a usage error.
func (c *cli) parse(fs *flag.FlagSet, args []string) (int, bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
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
		cases: fs.String("case", "", "run only the cases whose name matches this regular expression (e.g. '^1x7168 '): "+
			"parity cases for check and for bench on the CPU path, benchmark cases for bench on a GPU"),
		cpu: fs.Bool("cpu", false, "run the CPU path even when a GPU is present"),
	}
}

// caseKind is the kind of case a command runs.
type caseKind int

const (
	parityCases caseKind = iota // check, and bench on the CPU path
	benchCases                  // bench on a GPU
)

func (k caseKind) String() string {
	if k == benchCases {
		return "benchmark"
	}
	return "parity"
}

// runners says what runs cases of kind k, for messages.
func (k caseKind) runners() string {
	if k == benchCases {
		return "kittens bench on a GPU"
	}
	return "kittens check and the CPU path of kittens bench"
}

// names returns the names of op's cases of kind k.
func (k caseKind) names(op *suite.Op) []string {
	if k == benchCases {
		return caseNames(op.Benches, benchName)
	}
	return caseNames(op.Checks, checkName)
}

// resolve returns the selected ops, each with only the cases of the kind
// the command runs (benchmark cases on a GPU when benches is set, parity
// cases otherwise), and the device to run them on (nil: the CPU path). It
// returns false after reporting a pattern that is no use: invalid, or one
// that selects no case to run.
func (c *cli) resolve(fs *flag.FlagSet, sel selection, benches bool) ([]*suite.Op, *cuda.Device, bool) {
	m, err := newMatcher(*sel.pattern, *sel.cases)
	var ops []*suite.Op
	if err == nil {
		ops, err = m.ops()
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
		return nil, nil, false
	}
	dev := c.device(*sel.cpu)
	kind, here := parityCases, fs.Name()
	switch {
	case benches && dev != nil:
		kind, here = benchCases, fs.Name()+" on a GPU"
	case benches:
		here = "the CPU path of " + fs.Name()
	}
	if ops, err = m.cases(ops, kind, here); err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
		return nil, nil, false
	}
	return ops, dev, true
}

// matcher holds the compiled -op and -case patterns.
type matcher struct {
	pattern, casePattern string
	re, caseRe           *regexp.Regexp
}

// newMatcher compiles the -op and -case patterns (empty: match everything).
func newMatcher(pattern, casePattern string) (*matcher, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-op: %w", err)
	}
	caseRe, err := regexp.Compile(casePattern)
	if err != nil {
		return nil, fmt.Errorf("-case: %w", err)
	}
	return &matcher{pattern: pattern, casePattern: casePattern, re: re, caseRe: caseRe}, nil
}

// ops returns the registered ops whose name or family/name matches the -op
// pattern. A pattern that matches none is an error.
func (m *matcher) ops() ([]*suite.Op, error) {
	var out []*suite.Op
	for _, op := range families().Ops() {
		if m.re.MatchString(op.Name) || m.re.MatchString(op.Family+"/"+op.Name) {
			out = append(out, op)
		}
	}
	if len(out) == 0 && m.pattern != "" {
		return nil, fmt.Errorf("-op %q matches no registered op", m.pattern)
	}
	return out, nil
}

// cases returns ops, each with only its cases whose names match the -case
// pattern (both kinds), dropping an op left with no case of kind, the kind
// that here (the command, in words) runs. When the patterns leave no case
// of kind at all, that is an error that says why: what they select of the
// other kind, which something else runs, or else how the selected ops'
// cases of kind are named. Without -op and -case it is not an error: the
// command then says that there is no case.
func (m *matcher) cases(ops []*suite.Op, kind caseKind, here string) ([]*suite.Op, error) {
	var out []*suite.Op
	other := 0 // selected cases of the other kind
	for _, op := range ops {
		sel := *op
		sel.Checks = matching(op.Checks, checkName, m.caseRe)
		sel.Benches = matching(op.Benches, benchName, m.caseRe)
		n, o := len(sel.Checks), len(sel.Benches)
		if kind == benchCases {
			n, o = o, n
		}
		other += o
		if n > 0 {
			out = append(out, &sel)
		}
	}
	if len(out) > 0 || (m.pattern == "" && m.casePattern == "") {
		return out, nil
	}
	var flags []string
	if m.pattern != "" {
		flags = append(flags, fmt.Sprintf("-op %q", m.pattern))
	}
	if m.casePattern != "" {
		flags = append(flags, fmt.Sprintf("-case %q", m.casePattern))
	}
	what := strings.Join(flags, " ")
	otherKind := parityCases
	if kind == parityCases {
		otherKind = benchCases
	}
	if other > 0 {
		cases := fmt.Sprintf("%d %s cases", other, otherKind)
		if other == 1 {
			cases = fmt.Sprintf("one %s case", otherKind)
		}
		return nil, fmt.Errorf("%s selects no %s case, the kind %s runs, but %s (for %s)",
			what, kind, here, cases, otherKind.runners())
	}
	var names []string
	for _, op := range ops {
		for _, n := range kind.names(op) {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s selects no %s case: the ops it selects have none", what, kind)
	}
	const shown = 3
	if len(names) > shown {
		names = append(names[:shown], fmt.Sprintf("… (%d in all)", len(names)))
	}
	return nil, fmt.Errorf("%s selects no %s case; the selected ops' %s cases are named like %s",
		what, kind, kind, strings.Join(names, ", "))
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

// caseNames returns the names of cases.
func caseNames[C any](cases []C, name func(C) string) []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = name(c)
	}
	return out
}

// device opens GPU 0 unless cpu is set. Without one it says so on stderr
// and returns nil: the caller runs the CPU path.
func (c *cli) device(cpu bool) *cuda.Device {
	if cpu {
		fmt.Fprintln(c.stderr, "-cpu: running the CPU path (host reference) only")
		return nil
	}
	dev, err := cuda.Default()
	if err != nil {
		fmt.Fprintf(c.stderr, "no GPU (%v): running the CPU path (host reference) only\n", err)
		return nil
	}
	return dev
}

// eachCase calls fn on every case of ops (cases lists an op's), announcing
// each on stderr first.
func eachCase[C any](ops []*suite.Op, cases func(*suite.Op) []C, name func(C) string, stderr io.Writer,
	fn func(*suite.Op, C)) {
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

// warmCases hands every case of ops to warm (check.WarmAll or
// WarmBenches: each case's kernels loaded, many cases at once), with a
// progress line on a terminal, and then reports how long that took. A
// command's time on a machine whose disk cache is empty goes mostly to
// NVRTC, which so runs on every core instead of one case at a time.
func warmCases[C any](ops []*suite.Op, cases func(*suite.Op) []C, stderr io.Writer, warm func([]C, func())) {
	var all []C
	for _, op := range ops {
		all = append(all, cases(op)...)
	}
	p := newProgress(stderr, len(all))
	var tick func()
	if p.inTTY {
		var mu sync.Mutex
		tick = func() {
			mu.Lock()
			defer mu.Unlock()
			p.step("loading kernels")
		}
	}
	start, before := time.Now(), jit.Compiles()
	warm(all, tick)
	p.done()
	fmt.Fprintf(stderr, "loaded the kernels of %d cases in %.1f s (%d NVRTC compiles)\n", len(all), time.Since(start).Seconds(), jit.Compiles()-before)
}

// Accessors of an op's cases for eachCase.
func checksOf(op *suite.Op) []check.Case  { return op.Checks }
func benchesOf(op *suite.Op) []bench.Case { return op.Benches }
func checkName(c check.Case) string       { return c.Name }
func benchName(b bench.Case) string       { return b.Name }

// output is a file a command writes when its flag names one.
type output struct {
	path  string // "": not asked for
	write func(io.Writer) error
}

// emit writes a command's results: text to stdout, then every output asked
// for, even when stdout fails (a long GPU run keeps its numbers). It reports
// each error on stderr and returns whether all succeeded.
func (c *cli) emit(name string, text func(io.Writer) error, outs ...output) bool {
	ok := true
	if err := text(c.stdout); err != nil {
		fmt.Fprintf(c.stderr, "kittens %s: writing the results to stdout: %v\n", name, err)
		ok = false
	}
	for _, out := range outs {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			fmt.Fprintf(c.stderr, "kittens %s: %v\n", name, err)
			ok = false
		}
	}
	return ok
}

// writeFile writes a report through fn to path: to a temporary file in the
// same directory, renamed over path once complete, so that a failure leaves
// path as it was, never truncated. The file gets mode 0644.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	err = fn(f)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// checkOutputs checks, before a run, that every output asked for can be
// written: its folder exists and takes a new file, and the path is not a
// folder. It reports the first that cannot on stderr and returns false.
func (c *cli) checkOutputs(name string, outs map[string]string) bool {
	for _, flagName := range slices.Sorted(maps.Keys(outs)) {
		if err := writable(outs[flagName]); err != nil {
			fmt.Fprintf(c.stderr, "kittens %s: -%s: %v\n", name, flagName, err)
			return false
		}
	}
	return true
}

// writable reports why writeFile could not write path ("": nothing asked),
// by creating and removing a temporary file beside it.
func writable(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a folder, not a file", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot write %s: folder %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot write %s: %s is not a folder", path, dir)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// partialFlag adds -partial to fs.
func partialFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("partial", false, "let -write write a table that is not of a full GPU run: one of the CPU path, "+
		"or of part of the cases (-op, -case); without it such a run refuses -write, so as not to replace a full GPU table")
}

// refusePartial reports, and returns true, when -write asks for a table of
// a run that is not a full GPU run (on the CPU path, or of part of the
// cases) and -partial is not set.
func (c *cli) refusePartial(name, write string, partial bool, sel selection, dev *cuda.Device) bool {
	if write == "" || partial {
		return false
	}
	var what []string
	if dev == nil {
		what = append(what, "on the CPU path (no kernel runs)")
	}
	if *sel.pattern != "" || *sel.cases != "" {
		what = append(what, "of part of the cases (-op, -case)")
	}
	if len(what) == 0 {
		return false
	}
	fmt.Fprintf(c.stderr, "kittens %s: not writing %s: this run is %s, and its table would replace a full GPU table; "+
		"add -partial to write it anyway\n", name, write, strings.Join(what, " and "))
	return true
}
