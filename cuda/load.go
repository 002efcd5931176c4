package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// LoadError says which library could not be opened or used, and where the
// loader looked for it.
type LoadError struct {
	Library string   // "libcuda" or "libnvrtc"
	Tried   []string // paths or names tried, in order
	Detail  string
}

func (e *LoadError) Error() string {
	msg := "cuda: " + e.Library + ": " + e.Detail
	if len(e.Tried) > 0 {
		msg += " (looked for: " + strings.Join(e.Tried, ", ") + ")"
	}
	return msg
}

// EnvNVRTC names an environment variable that, when set, gives the NVRTC
// library to open (a path, or a name for the dynamic loader to find) in
// place of searching for one. A library it names that cannot be opened is
// an error: the search does not go on to another NVRTC.
const EnvNVRTC = "KITTENS_NVRTC"

var (
	driverOnce sync.Once
	driverErr  error
	nvrtcOnce  sync.Once
	nvrtcErr   error
	nvrtcPath  string
)

// Init opens the CUDA driver (libcuda.so.1), resolves its symbols and calls
// cuInit. It is safe to call many times; every exported function that needs the
// driver calls it. When no driver or no GPU is present it returns a *LoadError
// or *Error that says so; nothing panics.
func Init() error {
	driverOnce.Do(func() { driverErr = initDriver() })
	return driverErr
}

func initDriver() error {
	names := []string{"libcuda.so.1", "libcuda.so"}
	var h uintptr
	var err error
	for _, n := range names {
		if h, err = purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
	}
	if h == 0 {
		return &LoadError{Library: "libcuda", Tried: names,
			Detail: "no NVIDIA driver library found (is an NVIDIA GPU and driver installed?)"}
	}
	if err := resolveDriver(h); err != nil {
		return err
	}
	if r := cuInit.call(0); r != 0 {
		return newError("cuInit", r)
	}
	return nil
}

// initNVRTC opens NVRTC (see openNVRTC) and resolves its symbols, once.
func initNVRTC() error {
	nvrtcOnce.Do(func() {
		var h uintptr
		if nvrtcPath, h, nvrtcErr = openNVRTC(); nvrtcErr == nil {
			nvrtcErr = resolveNVRTC(h, nvrtcPath)
		}
	})
	return nvrtcErr
}

// openNVRTC opens the NVRTC library that $KITTENS_NVRTC names, or, where it
// is unset, the first one found under $CUDA_HOME and $CUDA_PATH, under
// /usr/local/cuda, on the dynamic loader's path, and in the
// nvidia-cuda-nvrtc wheel folders of Python installs.
func openNVRTC() (path string, handle uintptr, err error) {
	if p := os.Getenv(EnvNVRTC); p != "" {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return "", 0, &LoadError{Library: "libnvrtc",
				Detail: fmt.Sprintf("$%s names %s, which cannot be opened: %v", EnvNVRTC, p, err)}
		}
		return p, h, nil
	}
	tried := nvrtcCandidates()
	for _, p := range tried {
		if h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return p, h, nil
		}
	}
	return "", 0, &LoadError{Library: "libnvrtc", Tried: tried,
		Detail: "NVRTC not found; install the CUDA toolkit's NVRTC (or pip nvidia-cuda-nvrtc) or set " + EnvNVRTC}
}

// NVRTCPath reports the NVRTC library in use, loading it if needed.
func NVRTCPath() (string, error) {
	err := initNVRTC()
	return nvrtcPath, err
}

// nvrtcSonames are the names NVRTC is shipped under, newest first.
var nvrtcSonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}

// nvrtcCandidates lists the places openNVRTC searches, in order.
func nvrtcCandidates() []string {
	var out, dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	for _, d := range dirs {
		for _, n := range nvrtcSonames {
			out = append(out, filepath.Join(d, n))
		}
	}
	out = append(out, nvrtcSonames...) // the dynamic loader's own search path
	out = append(out, wheelNVRTC(sitePackages())...)
	return out
}

// sitePackages lists the package folders of the Python installs found in the
// usual places, the virtual environment in $VIRTUAL_ENV included.
func sitePackages() []string {
	var roots []string
	home, _ := os.UserHomeDir()
	for _, pat := range []string{
		"/usr/lib/python3*/site-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3*/dist-packages", "/usr/local/lib/python3*/dist-packages",
		"/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages",
		filepath.Join(home, ".local/lib/python3*/site-packages"),
		filepath.Join(home, ".pyenv/versions/*/lib/python3*/site-packages"),
	} {
		m, _ := filepath.Glob(pat)
		roots = append(roots, m...)
	}
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		m, _ := filepath.Glob(filepath.Join(v, "lib/python3*/site-packages"))
		roots = append(roots, m...)
	}
	return roots
}

// wheelNVRTC lists the NVRTC libraries inside pip's nvidia wheels under the
// given package folders (nvidia/cuda_nvrtc/lib for CUDA 12, nvidia/cu13/lib
// for CUDA 13), newest name first. The pattern matches the file name only,
// so a folder's name cannot exclude a library, and it leaves out the
// wheels' other NVRTC files (libnvrtc-builtins.so.*, libnvrtc.alt.so.*),
// which are not the library to open.
func wheelNVRTC(roots []string) []string {
	var out []string
	for _, r := range roots {
		for _, sub := range []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"} {
			m, _ := filepath.Glob(filepath.Join(r, sub, "libnvrtc.so*"))
			sort.Sort(sort.Reverse(sort.StringSlice(m)))
			out = append(out, m...)
		}
	}
	return out
}
