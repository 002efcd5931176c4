// Package jit compiles the library's CUDA kernels at run time with NVRTC, for
// the exact architecture of the device at hand, and caches the results: in
// process (one module per device and kernel) and on disk (one CUBIN per
// source, shared headers, options, NVRTC version and architecture).
//
// A kernel is specialized only by scalars, given as preprocessor defines
// (dtype, vector width, block size), so a cache key is small and explicit.
package jit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/include"
	"github.com/gokittens/kittens/tensor"
)

// Kernel is one kernel entry of one CUDA C++ source, specialized by defines.
type Kernel struct {
	File    string   // name used in logs and errors, e.g. "norm/rmsnorm.cu"
	Source  string   // the CUDA C++ source (usually go:embed)
	Entry   string   // the extern "C" __global__ function to load
	Defines []string // "NAME=VALUE" macros that specialize the source
	// Dependent builds the kernel for dependent launches: KITTENS_PDL is
	// defined, so that its wait_prior_grids waits (include/kittens.cuh),
	// and the function allows them (cuda.Function.AllowDependentLaunch).
	// It needs NVRTC 12 or later.
	Dependent bool
}

func (k Kernel) String() string {
	return k.File + ":" + k.Entry + "[" + strings.Join(k.defines(), ",") + "]"
}

// defines is Defines, behind KITTENS_PDL=1 for a Dependent kernel: what
// the source, its keys and its name are made of.
func (k Kernel) defines() []string {
	if !k.Dependent {
		return k.Defines
	}
	return append([]string{"KITTENS_PDL=1"}, k.Defines...)
}

// baseOptions are handed to NVRTC for every kernel.
var baseOptions = []string{"-std=c++17", "-default-device", "-lineinfo"}

// options returns the NVRTC options for a device of architecture arch.
func options(arch string) []string {
	return append([]string{"-arch=" + arch}, baseOptions...)
}

// defineName is what a specialization macro may be called: three or more
// capitals, digits or underscores. Shorter names (T, N) would collide with
// template parameters in NVRTC's built-in headers and ours.
var defineName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{2,}$`)

// source returns the text handed to NVRTC: the defines as #define lines,
// then the kernel's own source with its line numbers kept. Defines go into
// the text, not -D options, so that NVRTC's built-in headers, processed
// before the source, never see them.
func source(k Kernel) (string, error) {
	var b strings.Builder
	for i, d := range k.defines() {
		name, value, _ := strings.Cut(d, "=")
		if !defineName.MatchString(name) {
			return "", fmt.Errorf("jit: %s: define %q: names must be 3+ capitals/digits/underscores (e.g. DTYPE, VEC)", k.File, name)
		}
		if name == "KITTENS_PDL" && (i > 0 || !k.Dependent) {
			return "", fmt.Errorf("jit: %s: KITTENS_PDL is not a define to give: set Kernel.Dependent", k.File)
		}
		fmt.Fprintf(&b, "#define %s %s\n", name, value)
	}
	fmt.Fprintf(&b, "#line 1 %q\n", k.File)
	b.WriteString(k.Source)
	return b.String(), nil
}

// Key is the content hash that names a compiled kernel: file name (NVRTC
// gets it as the program name and in the #line that names the source in the
// CUBIN's line table), source, defines (KITTENS_PDL too), every shared
// header, options, NVRTC version and architecture.
func Key(k Kernel, arch, nvrtcVersion string) string {
	h := sha256.New()
	put := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	put("kittens-jit-3")
	put(k.File)
	put(k.Source)
	for _, d := range k.defines() {
		put(d)
	}
	for _, hd := range include.Headers() {
		put(hd.Name)
		put(hd.Source)
	}
	for _, o := range options(arch) {
		put(o)
	}
	put(nvrtcVersion)
	put(arch)
	return hex.EncodeToString(h.Sum(nil))
}

type memoKey struct {
	dev *cuda.Device
	k   string
}

// buildMemo holds the kernels built in this process, one entry per device
// and kernel.
type buildMemo struct {
	mu sync.Mutex
	m  map[memoKey]*entry
}

// entry is one build of one kernel for one device. Callers that find it
// wait for done and share its result.
type entry struct {
	done chan struct{}
	fn   *cuda.Function
	err  error
}

var memo buildMemo

// get returns the function memoized under key, calling build to make it
// when there is none. Concurrent callers of one key share one build. A
// failed build is not memoized: the callers that waited for it get its
// error, and the next get builds again, so that a transient failure (out of
// memory, say) does not disable a kernel for the life of the process.
func (b *buildMemo) get(key memoKey, build func() (*cuda.Function, error)) (*cuda.Function, error) {
	b.mu.Lock()
	e, found := b.m[key]
	if !found {
		e = &entry{done: make(chan struct{})}
		if b.m == nil {
			b.m = map[memoKey]*entry{}
		}
		b.m[key] = e
	}
	b.mu.Unlock()
	if found {
		<-e.done
		return e.fn, e.err
	}
	defer close(e.done)
	e.fn, e.err = build()
	if e.err != nil {
		b.mu.Lock()
		delete(b.m, key)
		b.mu.Unlock()
	}
	return e.fn, e.err
}

// errNoDevice is what Get and Prepare return for a nil device.
var errNoDevice = fmt.Errorf("jit: %w", cuda.ErrNilDevice)

// Get returns kernel k built for dev, compiling it if neither the process
// nor the disk cache has it. Concurrent calls for one kernel and device
// share one build; after a failed build the next call tries again. A nil
// dev is an error (cuda.ErrNilDevice).
func Get(dev *cuda.Device, k Kernel) (*cuda.Function, error) {
	if dev == nil {
		return nil, errNoDevice
	}
	mk := memoKey{dev, k.File + "\x00" + k.Entry + "\x00" + k.Source + "\x00" + strings.Join(k.defines(), "\x00")}
	return memo.get(mk, func() (*cuda.Function, error) { return build(dev, k) })
}

func build(dev *cuda.Device, k Kernel) (*cuda.Function, error) {
	cubin, err := cubinFor(dev.Props().Arch(), k)
	if err != nil {
		return nil, err
	}
	mod, err := dev.LoadModule(cubin)
	if err != nil {
		return nil, fmt.Errorf("jit: %s: %w", k, err)
	}
	fn, err := mod.Function(k.Entry)
	if err != nil {
		mod.Unload() // the lookup's error is the one to report
		return nil, fmt.Errorf("jit: %s: %w", k, err)
	}
	if k.Dependent {
		fn.AllowDependentLaunch()
	}
	return fn, nil
}

// compiled counts the kernels cubinFor compiled with NVRTC (not cache hits).
var compiled struct {
	sync.Mutex
	n int
}

// Compiles returns how many kernels this process has compiled with NVRTC.
func Compiles() int {
	compiled.Lock()
	defer compiled.Unlock()
	return compiled.n
}

// Compile returns the CUBIN of k for an architecture named as NVRTC names it
// (sm_90a; sm_90 for an NVRTC older than 12), from the disk cache or
// compiled with NVRTC alone: no driver or GPU is needed. Packages use it to
// check every specialization their pickers can yield before a GPU run.
func Compile(arch string, k Kernel) ([]byte, error) { return cubinFor(arch, k) }

// cubinFor returns the CUBIN of k for arch from the disk cache, or compiles
// it and stores it there.
func cubinFor(arch string, k Kernel) ([]byte, error) {
	ma, mi, err := cuda.NVRTCVersion()
	if err != nil {
		return nil, err
	}
	if k.Dependent && ma < 12 {
		// NVRTC 11.8 accepts griddepcontrol for sm_90 but crashes the
		// process compiling it (segmentation fault inside the library).
		return nil, fmt.Errorf("jit: %s: builds for dependent launches need NVRTC 12 or later; this is NVRTC %d.%d", k, ma, mi)
	}
	key := Key(k, arch, fmt.Sprintf("%d.%d", ma, mi))
	if b, ok := readCache(key); ok {
		return b, nil
	}
	src, err := source(k)
	if err != nil {
		return nil, err
	}
	cubin, err := cuda.CompileCUBIN(k.File, src, include.Headers(), options(arch))
	if err != nil {
		return nil, fmt.Errorf("jit: compiling %s: %w", k, err)
	}
	compiled.Lock()
	compiled.n++
	compiled.Unlock()
	writeCache(key, cubin)
	return cubin, nil
}

// Defines formats name=value pairs for Kernel.Defines, sorted by name so
// equal specializations give equal keys. A bool is written 1 or 0, a
// tensor.DType as its element type in kittens.cuh (include.CType), any
// other value as fmt's %v.
func Defines(kv map[string]any) []string {
	out := make([]string, 0, len(kv))
	for k, v := range kv {
		switch x := v.(type) {
		case bool:
			v = 0
			if x {
				v = 1
			}
		case tensor.DType:
			v = include.CType(x)
		}
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return out
}
