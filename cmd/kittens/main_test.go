package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// Three test ops: a copy, right on the host and on a GPU alike, one with a
// benchmark case only, and one whose only case always fails.
func init() {
	var testOps []*suite.Op
	defer func() {
		families = func() suite.Families {
			return append(registry.Families(), suite.Family{Name: "kittens-test", Ops: testOps, Torch: "# kittens-test"})
		}
	}()
	copyCase := func(rows, cols int) check.Case {
		return check.Case{Name: fmt.Sprintf("%dx%d f32", rows, cols),
			Spec: func(rng *rand.Rand) (check.Spec, error) {
				x := tensor.Rand(rng, tensor.F32, 1, rows, cols)
				return check.Spec{
					Tensors: []*tensor.Tensor{x, tensor.New(tensor.F32, rows, cols)},
					Names:   []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
					Run: func(s *cuda.Stream, ts []*tensor.Tensor) error { return ts[1].CopyFromOn(s, ts[0]) },
				}, nil
			}}
	}
	testOps = append(testOps, &suite.Op{Name: "kittens-test-copy", Family: "kittens-test", Doc: "y = x (a test op)",
		Checks:  []check.Case{copyCase(3, 5), copyCase(64, 33)},
		Benches: []bench.Case{{Name: "1024x1024 f32", Bytes: 2 * copyBytes, New: newCopy, Goal: bench.Goal{VsCompile: 1}}}})
	testOps = append(testOps, &suite.Op{Name: "kittens-test-bench-only", Family: "kittens-test", Doc: "no parity case (a test op)",
		Benches: []bench.Case{{Name: "8x8 f32", Bytes: 2 * copyBytes, New: newCopy}}})
	testOps = append(testOps, &suite.Op{Name: "kittens-test-bad", Family: "kittens-test", Doc: "always fails (a test op)",
		Checks: []check.Case{{Name: "broken", Spec: func(*rand.Rand) (check.Spec, error) {
			return check.Spec{}, errors.New("deliberately broken")
		}}}})
}

// copyBytes is the size of the test op's benchmark buffers.
const copyBytes = 4 << 20

// newCopy allocates one benchmark set of the test op: a device-to-device copy.
func newCopy(dev *cuda.Device, _ *rand.Rand) (bench.Instance, error) {
	src, err := dev.Alloc(copyBytes)
	if err != nil {
		return bench.Instance{}, err
	}
	dst, err := dev.Alloc(copyBytes)
	if err != nil {
		dev.Free(src)
		return bench.Instance{}, err
	}
	return bench.Instance{
		Run:  func(s *cuda.Stream) error { return s.CopyDtoD(dst, src, copyBytes) },
		Free: func() { dev.Free(src); dev.Free(dst) },
	}, nil
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	kernels, benchMD, benchJSON := filepath.Join(dir, "KERNELS.md"), filepath.Join(dir, "BENCH.md"), filepath.Join(dir, "bench.json")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  []string // each must appear
		stderr  []string
		files   map[string][]string // file → what it must hold
		nothing bool                // stdout must be empty
	}{
		{name: "no command", args: nil, code: exitUsage, stderr: []string{"usage: kittens"}, nothing: true},
		{name: "help", args: []string{"help"}, code: exitOK, nothing: true,
			stderr: []string{"kittens check [-op RE] [-case RE] [-cpu]", "kittens bench [-op RE] [-case RE] [-cpu]"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage,
			stderr: []string{`unknown command "frobnicate"`, "usage: kittens"}, nothing: true},
		{name: "unknown flag", args: []string{"check", "-frob"}, code: exitUsage, stderr: []string{"-frob"}, nothing: true},
		{name: "stray argument", args: []string{"list", "extra"}, code: exitUsage, stderr: []string{`unexpected argument "extra"`}},
		{name: "bad regexp", args: []string{"check", "-op", "("}, code: exitUsage, stderr: []string{"-op"}, nothing: true},
		{name: "no match", args: []string{"bench", "-op", "^no-such-op$"}, code: exitUsage, stderr: []string{"matches no registered op"}},
		// A -case that selects only cases the command does not run.
		{name: "check of a benchmark case", args: []string{"check", "-op", "^kittens-test-", "-case", "^1024x"}, code: exitUsage,
			stderr: []string{`-op "^kittens-test-" -case "^1024x" selects no parity case, the kind kittens check runs, ` +
				"but one benchmark case (for kittens bench on a GPU)"}},
		{name: "bench host path of a benchmark case", args: []string{"bench", "-cpu", "-op", "^kittens-test-copy$", "-case", "^1024x"},
			code: exitUsage, nothing: true,
			stderr: []string{"-cpu: running the CPU path", "selects no parity case, the kind the CPU path of kittens bench runs, but one benchmark case"}},
		{name: "case matches nothing", args: []string{"check", "-op", "^kittens-test-copy$", "-case", "^9x9"}, code: exitUsage,
			stderr: []string{`-case "^9x9" selects no parity case; the selected ops' parity cases are named like "3x5 f32", "64x33 f32"`}},
		{name: "op without such cases", args: []string{"bench", "-cpu", "-op", "^kittens-test-bench-only$"}, code: exitUsage,
			stderr: []string{`-op "^kittens-test-bench-only$" selects no parity case, the kind the CPU path of kittens bench runs, ` +
				"but one benchmark case"}},
		{name: "bad -vs", args: []string{"bench", "-vs", "jax"}, code: exitUsage, stderr: []string{`only "torch"`}},
		{name: "negative -runs", args: []string{"bench", "-runs", "-7"}, code: exitUsage, stderr: []string{"-runs -7: it must be ≥ 1"}},
		{name: "negative -graph", args: []string{"bench", "-graph", "-1"}, code: exitUsage, stderr: []string{"-graph -1: it must be ≥ 1"}},
		{name: "-pdl without -graph", args: []string{"bench", "-pdl"}, code: exitUsage, stderr: []string{"-pdl needs -graph"}},
		{name: "info", args: []string{"info"}, code: exitOK, stdout: []string{"driver", "nvrtc", "device", "jit cache"}},
		{name: "list", args: []string{"list"}, code: exitOK,
			stdout: []string{"family", "kittens-test  kittens-test-bad        1        0  always fails",
				"kittens-test  kittens-test-copy       2        1  y = x"}},
		// The CPU path says what it checked: no kernel was compared.
		{name: "check host path", args: []string{"check", "-cpu", "-op", "^kittens-test-copy$"}, code: exitOK,
			stdout: []string{"CPU path", "kittens-test-copy  3x5 f32", "PASS (cpu)",
				"2 host-path cases ran their CPU reference, which wrote every output and nothing else; no kernel was compared (CPU path only)"},
			stderr: []string{"-cpu: running the CPU path", "[1/2] kittens-test-copy 3x5 f32", "[2/2]"}},
		{name: "check failure", args: []string{"check", "-cpu", "-op", "^kittens-test-", "-write", kernels, "-partial"}, code: exitFail,
			stdout: []string{"FAIL kittens-test-bad broken (seed ", "deliberately broken", "1 of 3 host-path cases failed; the other 2 ran"},
			files: map[string][]string{kernels: {"# Kernel status", "| device | CPU path only (no GPU used) |",
				"| kittens-test | kittens-test-bad | 0/1 | — | — | FAIL |", "| kittens-test | kittens-test-copy | 2/2 | — | — | cpu only |",
				"## Failures", "## Cases", "| kittens-test-copy | 64x33 f32 | — | — | PASS (cpu) |"}}},
		{name: "bench host path", args: []string{"bench", "-cpu", "-op", "^kittens-test-copy$", "-runs", "2", "-vs", "torch",
			"-write", benchMD, "-partial", "-json", benchJSON}, code: exitOK,
			stdout: []string{"CPU path", "host µs", "kittens-test-copy  3x5 f32", "kittens-test-copy  64x33 f32"},
			stderr: []string{"comparison is skipped"},
			files: map[string][]string{benchMD: {"# Benchmarks", "| op | case | host µs |", "## Method"},
				benchJSON: {`"cpu_only": true`, `"op": "kittens-test-copy"`, `"runs": 2`}}},
		{name: "bench host failure", args: []string{"bench", "-cpu", "-op", "^kittens-test-bad$"}, code: exitFail,
			stdout: []string{"failed", "FAILED kittens-test-bad broken", "deliberately broken"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, w := range tc.stdout {
				if !strings.Contains(squash(stdout.String()), squash(w)) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tc.nothing && stdout.Len() > 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			for path, wants := range tc.files {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wants {
					if !strings.Contains(string(b), w) {
						t.Errorf("%s lacks %q:\n%s", filepath.Base(path), w, b)
					}
				}
				if strings.HasSuffix(path, ".json") && !json.Valid(b) {
					t.Errorf("%s is not valid JSON:\n%s", filepath.Base(path), b)
				}
			}
		})
	}
}

// squash collapses runs of spaces, so that tests do not depend on column
// widths (which other registered ops change).
func squash(s string) string { return spaces.ReplaceAllString(s, " ") }

var spaces = regexp.MustCompile(` +`)

// TestDefaultDevice runs check and bench without -cpu: on the GPU when
// there is one, otherwise on the CPU path, saying so.
func TestDefaultDevice(t *testing.T) {
	_, err := cuda.Default()
	gpu := err == nil
	for _, tc := range []struct {
		cmd      string
		gpu, cpu []string // stdout must hold these with and without a GPU
	}{
		{"check", []string{"kittens-test-copy 64x33 f32 0 0 PASS", "2/2 cases passed"}, []string{"PASS (cpu)", "no kernel was compared"}},
		{"bench", []string{"ours µs", "copy", "kittens-test-copy 1024x1024 f32"}, []string{"host µs"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{tc.cmd, "-op", "^kittens-test-copy$"}, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit status %d:\n%s\n%s", code, stdout.String(), stderr.String())
			}
			want := tc.cpu
			if gpu {
				want = tc.gpu
			}
			for _, w := range want {
				if !strings.Contains(squash(stdout.String()), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			// The notice of the CPU path goes to stderr, not into the table.
			if notice := "no GPU ("; gpu == strings.Contains(stderr.String(), notice) || strings.Contains(stdout.String(), notice) {
				t.Errorf("with a GPU %v: stderr, not stdout, should say %q exactly without one\nstdout:\n%s\nstderr:\n%s",
					gpu, notice, stdout.String(), stderr.String())
			}
			t.Log(stdout.String())
		})
	}
}

// TestSelect selects ops and cases as check (parity cases) and bench on a
// GPU (benchmark cases) do: a pattern that leaves no case of the kind the
// command runs is an error.
func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		pattern, cases string
		kind           caseKind
		want           []string // names that must be selected, op or op/case
		not            []string // names that must not
		err            bool
	}{
		{pattern: "", want: []string{"kittens-test-copy", "kittens-test-bad"}, not: []string{"kittens-test-bench-only"}},
		{pattern: "", kind: benchCases, want: []string{"kittens-test-copy", "kittens-test-bench-only"}, not: []string{"kittens-test-bad"}},
		{pattern: "^kittens-test-c", want: []string{"kittens-test-copy"}, not: []string{"kittens-test-bad"}},
		{pattern: "[", err: true},
		{pattern: "^nothing-matches$", err: true},
		{pattern: "^kittens-test-bad$", kind: benchCases, err: true},
		{pattern: "^kittens-test-", cases: "^3x5 ", want: []string{"kittens-test-copy", "kittens-test-copy/3x5 f32"},
			not: []string{"kittens-test-bad", "kittens-test-copy/64x33 f32", "kittens-test-copy/1024x1024 f32"}},
		{pattern: "^kittens-test-", cases: "^1024x", kind: benchCases, want: []string{"kittens-test-copy/1024x1024 f32"},
			not: []string{"kittens-test-bad", "kittens-test-copy/3x5 f32"}},
		{pattern: "^kittens-test-", cases: "^1024x", err: true}, // check, or bench's CPU path
		{pattern: "^kittens-test-", cases: "^3x5 ", kind: benchCases, err: true},
		{cases: "(", err: true},
		{cases: "^no such case$", err: true},
	} {
		t.Run(fmt.Sprint(tc.pattern, " ", tc.cases, " ", tc.kind), func(t *testing.T) {
			m, err := newMatcher(tc.pattern, tc.cases)
			var ops []*suite.Op
			if err == nil {
				ops, err = m.ops()
			}
			if err == nil {
				ops, err = m.cases(ops, tc.kind, "the test")
			}
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			names := map[string]bool{}
			for _, op := range ops {
				names[op.Name] = true
				for _, c := range op.Checks {
					names[op.Name+"/"+c.Name] = true
				}
				for _, b := range op.Benches {
					names[op.Name+"/"+b.Name] = true
				}
			}
			for _, n := range tc.want {
				if !names[n] {
					t.Errorf("%q not selected", n)
				}
			}
			for _, n := range tc.not {
				if names[n] {
					t.Errorf("%q selected", n)
				}
			}
		})
	}
}

// TestReportFailures merges bench runs: one whose cases all measured exits
// 0, one where only torch.compile failed on a case exits 1 and says so.
func TestReportFailures(t *testing.T) {
	dir := t.TempDir()
	env := bench.Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", CopyGBs: 4000}
	good := bench.Entry{Family: "kittens-test", Op: "kittens-test-copy", Case: "1024x1024 f32", Bytes: 2 * copyBytes,
		Result: bench.Result{MedianUS: 5, GBs: 1677.7, Sets: 16, Runs: 200}, Torch: &bench.TorchResult{EagerUS: 6, CompileUS: 7}}
	compileFailed := good
	compileFailed.Case = "2048x1024 f32"
	compileFailed.Torch = &bench.TorchResult{EagerUS: 6, Error: "BackendCompilerFailed: bang"}
	write := func(name string, entries ...bench.Entry) string {
		path := filepath.Join(dir, name)
		if err := writeFile(path, (&bench.Report{Env: env, Entries: entries}).WriteJSON); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ok, failed, empty := write("ok.json", good), write("failed.json", good, compileFailed), write("empty.json")
	okBytes, _ := os.ReadFile(ok)
	notReport, joined := filepath.Join(dir, "other.json"), filepath.Join(dir, "joined.json")
	os.WriteFile(notReport, []byte(`{"name": "x"}`), 0o644)
	os.WriteFile(joined, append(append([]byte(nil), okBytes...), okBytes...), 0o644)
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
	}{
		// The JSON holds no goals: the counts come from the registry's.
		{"all measured", []string{"report", ok}, exitOK,
			[]string{"kittens-test-copy 1024x1024 f32 5.00", "targets:", "kittens-test ≥ 1.00× torch.compile 1 1 — 0"}, nil},
		{"torch.compile failed", []string{"report", ok, failed}, exitFail,
			[]string{"2048x1024 f32 5.00 1678 41% 6.00 failed 1.20× —", "FAILED kittens-test-copy 2048x1024 f32: torch: BackendCompilerFailed: bang"}, nil},
		{"not a report", []string{"report", notReport}, exitFail, nil, []string{`other.json: bench: reading a JSON report: no "env" and "entries"`}},
		{"two reports in a file", []string{"report", joined}, exitFail, nil, []string{"joined.json: bench: reading a JSON report: more after the report's object"}},
		{"no cases", []string{"report", empty}, exitFail, nil, []string{"the reports hold no cases"}},
		{"flag after the files", []string{"report", ok, "-write", filepath.Join(dir, "OUT.md")}, exitUsage, nil,
			[]string{`"-write" after the files: flags go before them`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit status %d, want %d\n%s%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, w := range tc.stdout {
				if !strings.Contains(squash(stdout.String()), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// failingWriter stands for a stdout that is gone (a closed pipe).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestStdoutFails checks that the files asked for are written even when
// stdout fails, and that the command then fails.
func TestStdoutFails(t *testing.T) {
	dir := t.TempDir()
	md, js, kernels := filepath.Join(dir, "BENCH.md"), filepath.Join(dir, "bench.json"), filepath.Join(dir, "KERNELS.md")
	for _, tc := range []struct {
		args  []string
		files []string
	}{
		{[]string{"bench", "-cpu", "-op", "^kittens-test-copy$", "-runs", "1", "-write", md, "-partial", "-json", js}, []string{md, js}},
		{[]string{"check", "-cpu", "-op", "^kittens-test-copy$", "-write", kernels, "-partial"}, []string{kernels}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, failingWriter{}, &stderr); code != exitFail {
				t.Errorf("exit status %d, want %d", code, exitFail)
			}
			if !strings.Contains(stderr.String(), "writing the results to stdout: broken pipe") {
				t.Errorf("stderr lacks the stdout error:\n%s", stderr.String())
			}
			for _, f := range tc.files {
				if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "kittens-test-copy") {
					t.Errorf("%s: %v\n%s", filepath.Base(f), err, b)
				}
			}
		})
	}
}

// TestWriteFileKeepsOldOnError checks that a report that fails halfway
// leaves the file it would replace as it was, and no temporary file.
func TestWriteFileKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCH.md")
	if err := writeFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "old\n"); return err }); err != nil {
		t.Fatal(err)
	}
	err := writeFile(path, func(w io.Writer) error {
		io.WriteString(w, "half a ")
		return errors.New("report failed")
	})
	if err == nil || !strings.Contains(err.Error(), "report failed") {
		t.Fatalf("error %v, want the report's", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old\n" {
		t.Errorf("after a failed write the file holds %q (%v), want the old one", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left behind: %v", ents)
	}
	if err := writeFile(filepath.Join(dir, "no-such-dir", "x.md"), func(io.Writer) error { return nil }); err == nil {
		t.Error("wrote into a missing directory")
	}
}

// TestOpTableWorst checks that an op's worst errors are over the cases that
// were compared, whichever case errored first.
func TestOpTableWorst(t *testing.T) {
	r := checkResults{Rows: []checkRow{
		{Family: "f", Op: "op", Case: "a", Err: errors.New("launch failed")},
		{Family: "f", Op: "op", Case: "b", Report: check.Report{MaxAbs: 0.25, RelNorm: 0.001, Pass: true}},
		{Family: "f", Op: "op", Case: "c", Report: check.Report{MaxAbs: 0.5, RelNorm: 0.0005, Pass: true}},
		{Family: "f", Op: "cpu", Case: "a", Report: check.Report{Pass: true, CPUOnly: true}},
	}}
	var b bytes.Buffer
	if err := r.opTable().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| f | op | 2/3 | 0.5 | 0.001 | FAIL |", "| f | cpu | 1/1 | — | — | cpu only |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("op table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWritePartial: -write refuses a table of the CPU path or of part of
// the cases, which would replace a full GPU table, before any case runs,
// and writes nothing; -partial writes it.
func TestWritePartial(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"check on the CPU path, part of the cases", []string{"check", "-cpu", "-op", "^kittens-test-copy$"},
			"this run is on the CPU path (no kernel runs) and of part of the cases (-op, -case)"},
		{"check on the CPU path", []string{"check", "-cpu"}, "this run is on the CPU path (no kernel runs), and"},
		{"bench of a case", []string{"bench", "-cpu", "-case", "^3x5 f32$"}, "of part of the cases (-op, -case)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ToUpper(tc.args[0])+".md")
			var stdout, stderr bytes.Buffer
			code := run(append(tc.args, "-write", path), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "add -partial") {
				t.Errorf("exit status %d, want %d, and stderr saying %q and -partial:\n%s", code, exitUsage, tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "[1/") || stdout.Len() > 0 {
				t.Errorf("cases ran before the refusal:\n%s%s", stdout.String(), stderr.String())
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("%s written", path)
			}
		})
	}
	path := filepath.Join(dir, "PART.md")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "-cpu", "-op", "^kittens-test-copy$", "-write", path, "-partial"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("with -partial: exit status %d\n%s", code, stderr.String())
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "kittens-test-copy") {
		t.Errorf("with -partial: %v\n%s", err, b)
	}
}

// TestOutputsCheckedFirst: a -write, -json or -status path that cannot be
// written is a usage error before any case runs.
func TestOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-folder", "OUT.md")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run1 := filepath.Join(dir, "run.json")
	if err := writeFile(run1, (&bench.Report{Env: bench.Env{Device: "NVIDIA H200"}}).WriteJSON); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-cpu", "-partial", "-write", missing}, "-write: cannot write " + missing + ": folder " + filepath.Dir(missing) + " does not exist"},
		{[]string{"check", "-cpu", "-partial", "-write", dir}, "-write: " + dir + " is a folder, not a file"},
		{[]string{"bench", "-cpu", "-json", filepath.Join(file, "x.json")}, "-json: cannot write " + filepath.Join(file, "x.json") + ": " + file + " is not a folder"},
		{[]string{"report", "-write", missing, run1}, "-write: cannot write " + missing},
		{[]string{"report", "-status", filepath.Join(dir, "no-such-folder"), run1}, "-status: cannot write " + filepath.Join(missing, "..", "STATUS.md")},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "[1/") || stdout.Len() > 0 {
				t.Errorf("the run started:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}

// TestHelp: every command's -h prints its usage, with what it does and its
// flags, and exits 0.
func TestHelp(t *testing.T) {
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{cmd.name, "-h"}, &stdout, &stderr); code != exitOK {
				t.Errorf("exit status %d, want 0", code)
			}
			want := []string{"usage: kittens " + cmd.name, cmd.doc}
			if cmd.args != "" {
				want = append(want, "flags:")
			}
			for _, w := range want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("usage lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "-partial", "-h"}, &stdout, &stderr); code != exitOK || !strings.Contains(stderr.String(), "-partial") {
		t.Errorf("check -h: exit status %d\n%s", code, stderr.String())
	}
}

// TestReportMalformed: a file that is not well-formed JSON, or has a value
// of the wrong kind, is named with the line and column, in the file's
// terms rather than Go's.
func TestReportMalformed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, json, want string }{
		{"syntax.json", "{\n  \"env\": {}\n  \"entries\": []\n}", "syntax.json: bench: reading a JSON report: line 3, column 3: invalid character"},
		{"kind.json", "{\n  \"env\": {},\n  \"entries\": [{\"median_us\": \"fast\"}]\n}",
			`kind.json: bench: reading a JSON report: line 3, column 34: "entries.median_us" is a JSON string, want a number`},
		{"cut.json", `{"env": {}, "entries": [`, "cut.json: bench: reading a JSON report: the JSON ends before the report does"},
		{"empty.json", "", "empty.json: bench: reading a JSON report: the file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"report", path}, &stdout, &stderr); code != exitFail {
				t.Errorf("exit status %d, want %d", code, exitFail)
			}
			if !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "Go ") {
				t.Errorf("stderr:\n%s\nwant %q", stderr.String(), tc.want)
			}
		})
	}
}

// TestStatus: report -status writes STATUS.md, which names every family of
// the runs with its standing, and a non-empty roofline.svg beside it.
func TestStatus(t *testing.T) {
	dir := t.TempDir()
	env := bench.Env{Device: "NVIDIA H200", Arch: "sm_90a", Driver: "13.0", NVRTC: "13.0", CopyGBs: 4000,
		Date: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Floors: []bench.LaunchFloor{{Ours: bench.FloorSpan{StartUS: 3.4, EndUS: 3.5}}}}
	entry := func(fam, op, name string, mb, us, compile, same float64) bench.Entry {
		b := int64(mb * 1e6)
		return bench.Entry{Family: fam, Op: op, Case: name, Bytes: b, SameCopyGBs: same,
			Result: bench.Result{MedianUS: us, GBs: float64(b) / (us * 1e3), Sets: 1, Runs: 200},
			Torch:  &bench.TorchResult{EagerUS: 2 * us, CompileUS: compile}}
	}
	runPath := filepath.Join(dir, "run.json")
	rep := &bench.Report{Env: env, Entries: []bench.Entry{
		entry("kittens-test", "kittens-test-copy", "1024x1024 f32", 8.4, 4, 4.4, 0),    // goal ≥ 1.00× torch.compile: met
		entry("kittens-test", "kittens-test-copy", "2048x1024 f32", 100, 30, 27, 3800), // no goal in the registry
		entry("other", "other-op", "big", 200, 55, 60, 3900),
		entry("third", "third-op", "small", 0.01, 4, 4, 0),
	}}
	if err := writeFile(runPath, rep.WriteJSON); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "-status", dir, runPath}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d\n%s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, statusFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Status: NVIDIA H200 (sm_90a)", "2026-12-01", "copy ceiling 4000 GB/s",
		"| kittens-test | 2 | 1/1 | 0 | 0 | 0 |", "| other | 1 | — |", "| third | 1 | — |",
		"## kittens-test", "| ≥ 1.00× torch.compile | 1 | 1 | — | 0 |", "Every goal met.", "## other", "## third",
		"No goal is asked", "![Each case's rate against the copy ceiling](roofline.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s lacks %q:\n%s", statusFile, want, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, rooflineFile))
	if err != nil || len(svg) < 1000 || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("%s: %v, %d bytes", rooflineFile, err, len(svg))
	}
	for _, want := range []string{"kittens-test", "other", "third", "roofline: copy ceiling 4000 GB/s"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("%s lacks %q", rooflineFile, want)
		}
	}
}

// TestCompileProgress: the progress of jit.Prepare batches is drawn once
// a batch takes longer than the delay, and cleared at its end.
func TestCompileProgress(t *testing.T) {
	var b bytes.Buffer
	fn := compileProgress(&b, time.Hour)
	fn(1, 3)
	fn(2, 3)
	fn(3, 3)
	if b.Len() > 0 {
		t.Errorf("a quick batch drew %q", b.String())
	}
	fn = compileProgress(&b, 0)
	fn(1, 3)
	fn(2, 3)
	fn(3, 3)
	if want := "\r\x1b[Kcompiling kernels [1/3]\r\x1b[Kcompiling kernels [2/3]\r\x1b[K"; b.String() != want {
		t.Errorf("drew %q, want %q", b.String(), want)
	}
}
