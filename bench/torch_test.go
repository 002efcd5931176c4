package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testSnippet stands for a family's builders in the script.
const testSnippet = "# kittens-bench-test-snippet"

// fakePython writes a shell script that stands in for the interpreter:
// onCheck runs for `-c "import torch, triton"`, onScript for the script.
func fakePython(t *testing.T, onCheck, onScript string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	body := "#!/bin/sh\nif [ \"$1\" = -c ]; then\n" + onCheck + "\nfi\n" + onScript + "\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTorch(t *testing.T) {
	reqs := []TorchRequest{
		{ID: "a", Op: "rmsnorm", Args: map[string]any{"shape": []int{4, 8}, "dtype": "bf16"}},
		{ID: "b", Op: "softmax", Args: map[string]any{}},
	}
	// The script must hold the snippet before the call of main, and the
	// requests must arrive on stdin, leaving unset sets and runs to the
	// script's defaults (a zero there timed nothing); otherwise the fake
	// fails.
	protocol := `script="$1"
grep -q '` + testSnippet + `' "$script" || { echo "snippet missing" >&2; exit 3; }
[ "$(tail -n 1 "$script")" = "    main()" ] || { echo "main is not last" >&2; exit 3; }
[ "$PYTHONUNBUFFERED" = 1 ] || exit 5
in=$(cat)
case "$in" in *'"op":"rmsnorm"'*'"shape":[4,8]'*) ;; *) echo "bad stdin: $in" >&2; exit 4;; esac
case "$in" in *'"runs":0'*|*'"sets":0'*) echo "zero runs or sets, not the script's defaults: $in" >&2; exit 4;; esac
echo 'a builder printed this'
echo '{"id": "a", "eager_us": 26.5, "compile_us": 39.25}'
echo '{"id": "b", "error": "RuntimeError: boom"}'`
	for _, tc := range []struct {
		name    string
		python  string // KITTENS_PYTHON; "" leaves it unset
		reqs    []TorchRequest
		want    map[string]TorchResult
		wantErr string
	}{
		{name: "no requests", python: "/nonexistent/python3", want: map[string]TorchResult{}},
		{name: "python missing", python: "/nonexistent/python3", reqs: reqs,
			wantErr: "needs Python: /nonexistent/python3 not found (set KITTENS_PYTHON)"},
		{name: "torch missing", python: fakePython(t, `echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1`, "exit 9"),
			reqs: reqs, wantErr: "needs torch and triton"},
		{name: "protocol", python: fakePython(t, "exit 0", protocol), reqs: reqs,
			want: map[string]TorchResult{"a": {EagerUS: 26.5, CompileUS: 39.25}, "b": {Error: "RuntimeError: boom"}}},
		{name: "result lost", python: fakePython(t, "exit 0", `cat >/dev/null; echo '{"id": "a", "eager_us": 3}'; printf 'warning: '; echo '{"id": "b", "eager_us": 4}'`),
			reqs: reqs, want: map[string]TorchResult{"a": {EagerUS: 3}, "b": {Error: "the torch script gave no result for this case"}}},
		{name: "script crashes", python: fakePython(t, "exit 0", `cat >/dev/null; echo '{"id": "a", "eager_us": 3}'; exit 1`),
			reqs: reqs, want: map[string]TorchResult{"a": {EagerUS: 3}}, wantErr: "torch script: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPython, tc.python)
			got, err := Torch([]string{testSnippet}, tc.reqs)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("results %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTorchScriptOrder(t *testing.T) {
	s := TorchScript([]string{testSnippet})
	base := strings.Index(s, "def builder(")
	snip := strings.Index(s, testSnippet)
	call := strings.LastIndex(s, "main()")
	if base < 0 || snip < base || call < snip {
		t.Fatalf("want harness, then snippets, then main(): positions %d, %d, %d", base, snip, call)
	}
}

// TestFloorRequest: PyTorch's launch floor is timed as ours was, eagerly,
// by a builder the script defines itself.
func TestFloorRequest(t *testing.T) {
	for _, tc := range []struct {
		opt  Options
		want TorchRequest
	}{
		{Options{Runs: 150, Graph: 16}, TorchRequest{ID: "floor", Op: floorOp, NoCompile: true, Sets: 1, Runs: 150, Graph: 16}},
		{Options{}, TorchRequest{ID: "floor", Op: floorOp, NoCompile: true, Sets: 1, Runs: 200}},
	} {
		if got := FloorRequest("floor", tc.opt); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("FloorRequest(%+v) = %+v, want %+v", tc.opt, got, tc.want)
		}
	}
	if !strings.Contains(TorchScript([]string{testSnippet}), `@builder("`+floorOp+`")`) {
		t.Errorf("the script defines no builder %q", floorOp)
	}
}

func TestTorchRequestFor(t *testing.T) {
	args := map[string]any{"rows": 4}
	measured := Result{MedianUS: 4, Sets: 3, Runs: 100}
	withTorch := Case{Name: "x", Torch: &TorchCase{Op: "rmsnorm", Args: args}}
	for _, tc := range []struct {
		name string
		b    Case
		r    Result
		want TorchRequest
		ok   bool
	}{
		{"none", Case{Name: "x"}, measured, TorchRequest{}, false},
		{"case", withTorch, measured, TorchRequest{ID: "id", Op: "rmsnorm", Args: args, Sets: 3, Runs: 100}, true},
		// Our measurement failed: PyTorch would be timed with nothing to
		// compare with, and not as ours was.
		{"ours failed", withTorch, Result{}, TorchRequest{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TorchRequestFor("id", tc.b, tc.r)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReadTorchLines(t *testing.T) {
	out := map[string]TorchResult{}
	var other bytes.Buffer
	in := "hello\n{\"id\": \"a\", \"eager_us\": 1}\n[1, 2]\n{\"eager_us\": 2}\n"
	if err := readTorchLines(strings.NewReader(in), out, &other); err != nil {
		t.Fatal(err)
	}
	if want := map[string]TorchResult{"a": {EagerUS: 1}}; !reflect.DeepEqual(out, want) {
		t.Errorf("results %v, want %v", out, want)
	}
	if want := "hello\n[1, 2]\n{\"eager_us\": 2}\n"; other.String() != want {
		t.Errorf("passed through %q, want %q", other.String(), want)
	}
}

// TestTorchScriptResetsL2 checks that the script resets L2's persisting
// lines before it times a case, as Measure does before ours: torch.compile's
// reductions leave evict-last lines too, and without the reset PyTorch's
// case after a large one paid for them while ours did not.
func TestTorchScriptResetsL2(t *testing.T) {
	_, body, ok := strings.Cut(torchBase, "\ndef time_us(")
	if !ok {
		t.Fatal("no time_us in torch_base.py")
	}
	body, _, _ = strings.Cut(body, "\ndef ")
	reset, first := strings.Index(body, "\n    reset_persisting_l2()\n"), strings.Index(body, "fn(*input_sets[0])")
	if reset < 0 || first < 0 || reset > first {
		t.Errorf("time_us does not reset L2's persisting lines before its first call (reset at %d, first call at %d)", reset, first)
	}
	if !strings.Contains(torchBase, "_libcuda.cuCtxResetPersistingL2Cache()") {
		t.Error("reset_persisting_l2 does not call cuCtxResetPersistingL2Cache")
	}
}
