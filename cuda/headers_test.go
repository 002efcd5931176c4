package cuda

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// toolkitInclude finds the CUDA toolkit's include folder, or "" when absent.
func toolkitInclude() string {
	for _, root := range []string{os.Getenv("CUDA_HOME"), os.Getenv("CUDA_PATH"), "/usr/local/cuda"} {
		if root == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "include", "cuda.h")); err == nil {
			return filepath.Join(root, "include")
		}
	}
	return ""
}

var (
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineComment  = regexp.MustCompile(`//[^\n]*`)
)

// prototypes returns the parameter list of the first declaration of each
// function in a header, comments removed.
func prototypes(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := blockComment.ReplaceAllString(string(b), "")
	return lineComment.ReplaceAllString(s, "")
}

// cTypeWidth is the register width (4 or 8 bytes) of a parameter type.
var cTypeWidth = map[string]int{
	"size_t": 8, "CUdeviceptr": 8, "cuuint64_t": 8, "unsigned long long": 8,
	"CUcontext": 8, "CUstream": 8, "CUgraph": 8, "CUgraphExec": 8, "CUevent": 8, "CUmodule": 8, "CUfunction": 8, "nvrtcProgram": 8,
	"int": 4, "unsigned int": 4, "unsigned char": 4, "cuuint32_t": 4, "CUdevice": 4, "CUresult": 4,
	"CUdevice_attribute": 4, "CUstreamCaptureMode": 4, "CUfunction_attribute": 4, "nvrtcResult": 4, "CUtensorMapDataType": 4,
	"CUtensorMapInterleave": 4, "CUtensorMapSwizzle": 4, "CUtensorMapL2promotion": 4, "CUtensorMapFloatOOBfill": 4,
}

var kindWidth = map[argKind]int{aPtr: 8, aSize: 8, aU64: 8, aU32: 4, aI32: 4}

// paramWidth returns the width of one C parameter declaration.
func paramWidth(p string) (int, string) {
	p = strings.TrimSpace(p)
	if strings.Contains(p, "*") || strings.Contains(p, "[") {
		return 8, "pointer"
	}
	fields := strings.Fields(strings.ReplaceAll(p, "const ", ""))
	if len(fields) > 1 { // drop the parameter name
		fields = fields[:len(fields)-1]
	}
	ty := strings.Join(fields, " ")
	return cTypeWidth[ty], ty
}

// TestBindingsMatchHeaders checks every bound symbol's argument count and
// widths against the prototypes in the toolkit's cuda.h and nvrtc.h, and the
// enum values we hard-code against the header's.
func TestBindingsMatchHeaders(t *testing.T) {
	inc := toolkitInclude()
	if inc == "" {
		if os.Getenv("KITTENS_REQUIRE_GPU") == "1" {
			t.Fatal("no CUDA toolkit headers found (CUDA_HOME, CUDA_PATH, /usr/local/cuda)")
		}
		t.Skip("no CUDA toolkit headers")
	}
	src := map[lib]string{
		libDriver: prototypes(t, filepath.Join(inc, "cuda.h")),
		libNVRTC:  prototypes(t, filepath.Join(inc, "nvrtc.h")),
	}
	for _, b := range bindings {
		re := regexp.MustCompile(`\b` + b.name + `\s*\(([^;{)]*(?:\([^)]*\))?[^;{)]*)\)\s*;`)
		m := re.FindStringSubmatch(src[b.lib])
		if m == nil {
			t.Errorf("%s: no prototype found", b.name)
			continue
		}
		params := strings.TrimSpace(m[1])
		var parts []string
		if params != "" && params != "void" {
			parts = strings.Split(params, ",")
		}
		if len(parts) != len(b.args) {
			t.Errorf("%s: header has %d parameters (%s), binding has %d", b.name, len(parts), params, len(b.args))
			continue
		}
		for i, p := range parts {
			w, ty := paramWidth(p)
			if w == 0 {
				t.Errorf("%s: parameter %d %q: unknown type %q", b.name, i, p, ty)
				continue
			}
			if kw := kindWidth[argKind(b.args[i])]; kw != w {
				t.Errorf("%s: parameter %d %q is %d bytes, binding passes %d", b.name, i, strings.TrimSpace(p), w, kw)
			}
		}
	}
	enums := map[string]int{
		"CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": attrMaxThreadsPerBlock, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": attrSharedPerBlock,
		"CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK": attrRegistersPerBlock, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": attrMultiprocessors,
		"CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE": attrMemClock, "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH": attrMemBusWidth,
		"CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE": attrL2Size, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": attrCCMajor,
		"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": attrCCMinor, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": attrSharedPerSM,
		"CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": attrSharedPerBlockOptin,
		"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK":               int(FuncMaxThreadsPerBlock), "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": int(FuncSharedSizeBytes),
		"CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": int(FuncLocalSizeBytes), "CU_FUNC_ATTRIBUTE_NUM_REGS": int(FuncNumRegs),
		"CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES":       int(FuncMaxDynamicShared),
		"CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED":   int(FuncNonPortableClusterOK),
		"CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION":                 launchAttrClusterDimension,
		"CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION": launchAttrProgrammaticStreamSerialization,
		"CU_TENSOR_MAP_DATA_TYPE_UINT8":                         int(MapUint8), "CU_TENSOR_MAP_DATA_TYPE_UINT16": int(MapUint16),
		"CU_TENSOR_MAP_DATA_TYPE_UINT32": int(MapUint32), "CU_TENSOR_MAP_DATA_TYPE_INT32": int(MapInt32),
		"CU_TENSOR_MAP_DATA_TYPE_INT64": int(MapInt64), "CU_TENSOR_MAP_DATA_TYPE_FLOAT16": int(MapFloat16),
		"CU_TENSOR_MAP_DATA_TYPE_FLOAT32": int(MapFloat32), "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16": int(MapBFloat16),
		"CU_TENSOR_MAP_SWIZZLE_NONE": int(SwizzleNone), "CU_TENSOR_MAP_SWIZZLE_128B": int(Swizzle128B),
		"CU_STREAM_CAPTURE_MODE_GLOBAL": int(CaptureGlobal), "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL": int(CaptureThreadLocal),
		"CU_STREAM_CAPTURE_MODE_RELAXED": int(CaptureRelaxed), "CU_STREAM_CAPTURE_STATUS_NONE": captureNone, "CU_STREAM_CAPTURE_STATUS_ACTIVE": captureActive,
	}
	values := enumValues(src[libDriver])
	for name, want := range enums {
		got, ok := values[name]
		if !ok {
			t.Errorf("%s: not found in cuda.h", name)
		} else if got != want {
			t.Errorf("%s = %d in cuda.h, we use %d", name, got, want)
		}
	}
}

var enumBlock = regexp.MustCompile(`(?s)enum\s+\w*\s*\{(.*?)\}`)

// enumValues returns the value of every enumerator in the header, following
// C's rule that an enumerator without "= value" is one more than the last.
func enumValues(src string) map[string]int {
	out := map[string]int{}
	for _, blk := range enumBlock.FindAllStringSubmatch(src, -1) {
		next := 0
		for _, item := range strings.Split(blk[1], ",") {
			name, val, hasVal := strings.Cut(strings.TrimSpace(item), "=")
			name = strings.TrimSpace(name)
			if name == "" || strings.ContainsAny(name, " #") {
				continue
			}
			if hasVal {
				v, err := strconv.ParseInt(strings.TrimSpace(val), 0, 64)
				if err != nil {
					if ref, ok := out[strings.TrimSpace(val)]; ok {
						v = int64(ref)
					} else {
						continue // an expression we do not evaluate
					}
				}
				next = int(v)
			}
			out[name] = next
			next++
		}
	}
	return out
}
