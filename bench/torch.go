package bench

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

//go:embed torch_base.py
var torchBase string

// torchMain ends the script: it runs once every family's builders exist.
const torchMain = "\n\nif __name__ == \"__main__\":\n    main()\n"

// EnvPython names the variable that picks the Python interpreter of the
// PyTorch comparison (default "python3").
const EnvPython = "KITTENS_PYTHON"

// TorchRequest is one case for the PyTorch side of the comparison. The
// script times it as Measure times ours (see torch_base.py): Sets input
// sets rotated, Runs launches back to back behind a spin kernel, the
// median.
type TorchRequest struct {
	ID        string         `json:"id"`   // unique in one call; keys the results
	Op        string         `json:"op"`   // builder name in a family's snippet
	Args      map[string]any `json:"args"` // shape, dtype and options
	NoCompile bool           `json:"no_compile,omitempty"`
	Sets      int            `json:"sets,omitempty"`  // input sets to rotate (the Result.Sets of our run); 0: one
	Runs      int            `json:"runs,omitempty"`  // timed launches; 0: the script's default, 100
	Graph     int            `json:"graph,omitempty"` // calls per CUDA graph replay (the Result.Graph of our run); 0: no graph
	// PDL: our launches in those graphs were dependent launches
	// (Result.Dependent); torch.compile's kernels are then compiled with
	// Inductor's triton.enable_pdl.
	PDL bool `json:"pdl,omitempty"`
}

// TorchResult is PyTorch's time for one case, in µs. CompileUS is zero when
// torch.compile was not asked for; Error is set when the case failed there.
type TorchResult struct {
	EagerUS   float64 `json:"eager_us,omitempty"`
	CompileUS float64 `json:"compile_us,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// TorchRequestFor returns the request of a registered benchmark case, timed
// as r (ours) was: as many input sets rotated, as many launches. It returns
// false when the case has no PyTorch counterpart, and when our own
// measurement failed (r has no sets or runs): there is then no time to
// compare with, nor a way to time PyTorch alike.
func TorchRequestFor(id string, b Case, r Result) (TorchRequest, bool) {
	if b.Torch == nil || r.Sets < 1 || r.Runs < 1 {
		return TorchRequest{}, false
	}
	return TorchRequest{ID: id, Op: b.Torch.Op, Args: b.Torch.Args, Sets: r.Sets, Runs: r.Runs, Graph: r.Graph, PDL: r.Dependent}, true
}

// floorOp is torch_base.py's builder of the launch floor (FloorRequest).
const floorOp = "_empty_kernel"

// FloorRequest returns the request that times PyTorch's launch floor as
// Floor times ours with opt: torch.cuda._sleep(0), a kernel that does next
// to nothing, one launch at a time or in graphs as opt says, eager only.
func FloorRequest(id string, opt Options) TorchRequest {
	opt.defaults()
	return TorchRequest{ID: id, Op: floorOp, NoCompile: true, Sets: 1, Runs: opt.Runs, Graph: opt.Graph}
}

// TorchScript returns the Python program Torch runs: the harness
// (torch_base.py), the families' snippets of builders, then the call of
// main.
func TorchScript(snippets []string) string {
	var b strings.Builder
	b.WriteString(torchBase)
	for _, s := range snippets {
		b.WriteString("\n\n")
		b.WriteString(s)
	}
	b.WriteString(torchMain)
	return b.String()
}

// python returns the interpreter to run, from KITTENS_PYTHON or python3.
func python() string {
	if p := os.Getenv(EnvPython); p != "" {
		return p
	}
	return "python3"
}

// Torch times every request with PyTorch eager and torch.compile, in one
// Python process on the GPU this process also uses. It writes TorchScript(snippets) to
// a temporary file, runs it with the requests as JSON on stdin and reads one
// JSON line per case from its stdout; Python's stderr (tracebacks, compile
// warnings) streams through to this process's stderr. Before that it checks
// that the interpreter exists and imports torch and triton, and says which
// is missing. The results are keyed by request ID, one for every request
// (with an Error where the script gave none); on a later failure of the
// script, the results read so far come back with the error.
func Torch(snippets []string, reqs []TorchRequest) (map[string]TorchResult, error) {
	out := map[string]TorchResult{}
	if len(reqs) == 0 {
		return out, nil
	}
	py := python()
	path, err := exec.LookPath(py)
	if err != nil {
		return nil, fmt.Errorf("bench: the PyTorch comparison needs Python: %s not found (set %s): %w", py, EnvPython, err)
	}
	if msg, err := exec.Command(path, "-c", "import torch, triton").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: the PyTorch comparison needs torch and triton, which %s cannot import: %v: %s",
			path, err, lastLine(msg))
	}
	in, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("bench: torch requests: %w", err)
	}
	f, err := os.CreateTemp("", "kittens-torch-*.py")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(TorchScript(snippets))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, f.Name())
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	readErr := readTorchLines(stdout, out, os.Stderr)
	if err := cmd.Wait(); err != nil {
		return out, fmt.Errorf("bench: torch script: %w", err)
	}
	if readErr != nil {
		return out, readErr
	}
	// A script that ran to the end owes a line for every request; one
	// that never came (its line run into another print, say) is a failed
	// case, not a dash that passes.
	for _, r := range reqs {
		if _, ok := out[r.ID]; !ok {
			out[r.ID] = TorchResult{Error: "the torch script gave no result for this case"}
		}
	}
	return out, nil
}

// readTorchLines collects the script's result lines into out. Lines that are
// not results (a builder's own prints) go to other.
func readTorchLines(r io.Reader, out map[string]TorchResult, other io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var line struct {
			ID *string `json:"id"`
			TorchResult
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.ID == nil {
			fmt.Fprintln(other, sc.Text())
			continue
		}
		out[*line.ID] = line.TorchResult
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("bench: reading the torch script's output: %w", err)
	}
	return nil
}

// lastLine returns the last non-empty line of b (Python's exception line).
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
