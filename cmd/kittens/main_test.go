package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/tensor"
)

// Two test ops: a copy, right on the host and on a GPU alike, and one whose
// only case always fails.
func init() {
	copyCase := func(rows, cols int) registry.Check {
		return registry.Check{Name: fmt.Sprintf("%dx%d f32", rows, cols),
			Run: func(dev *cuda.Device, rng *rand.Rand) (check.Report, error) {
				x := tensor.Rand(rng, tensor.F32, 1, rows, cols)
				return check.Run(dev, check.Spec{
					Tensors: []*tensor.Tensor{x, tensor.New(tensor.F32, rows, cols)},
					Names:   []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
					Run: func(ts []*tensor.Tensor) error { return ts[1].CopyFrom(ts[0]) },
				})
			}}
	}
	registry.Register(&registry.Op{Name: "kittens-test-copy", Family: "kittens-test", Doc: "y = x (a test op)",
		Checks:  []registry.Check{copyCase(3, 5), copyCase(64, 33)},
		Benches: []registry.Bench{{Name: "1024x1024 f32", Bytes: 2 * copyBytes, New: newCopy}}})
	registry.Register(&registry.Op{Name: "kittens-test-bad", Family: "kittens-test", Doc: "always fails (a test op)",
		Checks: []registry.Check{{Name: "broken", Run: func(*cuda.Device, *rand.Rand) (check.Report, error) {
			return check.Report{}, errors.New("deliberately broken")
		}}}})
}

// copyBytes is the size of the test op's benchmark buffers.
const copyBytes = 4 << 20

// newCopy allocates one benchmark set of the test op: a device-to-device copy.
func newCopy(dev *cuda.Device, _ *rand.Rand) (registry.Instance, error) {
	src, err := dev.Alloc(copyBytes)
	if err != nil {
		return registry.Instance{}, err
	}
	dst, err := dev.Alloc(copyBytes)
	if err != nil {
		dev.Free(src)
		return registry.Instance{}, err
	}
	return registry.Instance{
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
		{name: "help", args: []string{"help"}, code: exitOK, stderr: []string{"kittens bench"}, nothing: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage,
			stderr: []string{`unknown command "frobnicate"`, "usage: kittens"}, nothing: true},
		{name: "unknown flag", args: []string{"check", "-frob"}, code: exitUsage, stderr: []string{"-frob"}, nothing: true},
		{name: "stray argument", args: []string{"list", "extra"}, code: exitUsage, stderr: []string{`unexpected argument "extra"`}},
		{name: "bad regexp", args: []string{"check", "-op", "("}, code: exitUsage, stderr: []string{"-op"}, nothing: true},
		{name: "no match", args: []string{"bench", "-op", "^no-such-op$"}, code: exitUsage, stderr: []string{"matches no registered op"}},
		{name: "bad -vs", args: []string{"bench", "-vs", "jax"}, code: exitUsage, stderr: []string{`only "torch"`}},
		{name: "info", args: []string{"info"}, code: exitOK, stdout: []string{"driver", "nvrtc", "device", "jit cache"}},
		{name: "list", args: []string{"list"}, code: exitOK,
			stdout: []string{"family", "kittens-test  kittens-test-bad        1        0  always fails",
				"kittens-test  kittens-test-copy       2        1  y = x"}},
		{name: "check host path", args: []string{"check", "-cpu", "-op", "^kittens-test-copy$"}, code: exitOK,
			stdout: []string{"CPU path", "kittens-test-copy  3x5 f32", "PASS (cpu)", "2/2 cases passed"},
			stderr: []string{"[1/2] kittens-test-copy 3x5 f32", "[2/2]"}},
		{name: "check failure", args: []string{"check", "-cpu", "-op", "^kittens-test-", "-write", kernels}, code: exitFail,
			stdout: []string{"FAIL kittens-test-bad broken (seed ", "deliberately broken", "2/3 cases passed"},
			files: map[string][]string{kernels: {"# Kernel status", "| device | CPU path only (no GPU used) |",
				"| kittens-test | kittens-test-bad | 0/1 | — | — | FAIL |", "| kittens-test | kittens-test-copy | 2/2 | — | — | cpu only |",
				"## Failures", "## Cases", "| kittens-test-copy | 64x33 f32 | — | — | PASS (cpu) |"}}},
		{name: "bench host path", args: []string{"bench", "-cpu", "-op", "^kittens-test-copy$", "-runs", "2", "-vs", "torch",
			"-write", benchMD, "-json", benchJSON}, code: exitOK,
			stdout: []string{"CPU path", "host µs", "kittens-test-copy  3x5 f32", "kittens-test-copy  64x33 f32", "comparison is skipped"},
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
		{"check", []string{"kittens-test-copy 64x33 f32 0 0 PASS", "2/2 cases passed"}, []string{"no GPU", "PASS (cpu)"}},
		{"bench", []string{"ours µs", "copy", "kittens-test-copy 1024x1024 f32"}, []string{"no GPU", "host µs"}},
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
			t.Log(stdout.String())
		})
	}
}

func TestSelectOps(t *testing.T) {
	for _, tc := range []struct {
		pattern, cases string
		want           []string // names that must be selected, op or op/case
		not            []string // names that must not
		err            bool
	}{
		{pattern: "", want: []string{"kittens-test-copy", "kittens-test-bad"}},
		{pattern: "^kittens-test-c", want: []string{"kittens-test-copy"}, not: []string{"kittens-test-bad"}},
		{pattern: "[", err: true},
		{pattern: "^nothing-matches$", err: true},
		{pattern: "^kittens-test-", cases: "^3x5 ", want: []string{"kittens-test-copy", "kittens-test-copy/3x5 f32"},
			not: []string{"kittens-test-bad", "kittens-test-copy/64x33 f32", "kittens-test-copy/1024x1024 f32"}},
		{pattern: "^kittens-test-", cases: "^1024x", want: []string{"kittens-test-copy/1024x1024 f32"},
			not: []string{"kittens-test-bad", "kittens-test-copy/3x5 f32"}},
		{cases: "(", err: true},
		{cases: "^no such case$", err: true},
	} {
		t.Run(tc.pattern+" "+tc.cases, func(t *testing.T) {
			ops, err := selectOps(tc.pattern, tc.cases)
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
