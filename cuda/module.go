package cuda

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Module is loaded device code (a CUBIN).
type Module struct {
	dev *Device
	h   uintptr
}

// LoadModule loads a CUBIN image into the device's context.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if err := d.bind(); err != nil {
		return nil, err
	}
	defer unbind()
	h := new(uintptr)
	err := newError("cuModuleLoadData", cuModuleLoadData.call(ptr(h), hostPtr(image)))
	runtime.KeepAlive(image)
	if err != nil {
		return nil, err
	}
	return &Module{dev: d, h: *h}, nil
}

// Unload releases the module.
func (m *Module) Unload() error {
	if err := m.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuModuleUnload", cuModuleUnload.call(m.h))
}

// Function is one kernel of a module.
type Function struct {
	dev  *Device
	h    uintptr
	Name string

	// dependentOK: the kernel waits for the grids before it before it
	// touches memory (AllowDependentLaunch).
	dependentOK bool

	// reserved is the most dynamic shared memory a launch may ask for
	// without raising the limit again (see ReserveShared); 0: not yet known.
	reserved   atomic.Int64
	reservedMu sync.Mutex
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	if err := m.dev.bind(); err != nil {
		return nil, err
	}
	defer unbind()
	cname := append([]byte(name), 0)
	h := new(uintptr)
	err := newError("cuModuleGetFunction", cuModuleGetFunction.call(ptr(h), m.h, hostPtr(cname)))
	runtime.KeepAlive(cname)
	if err != nil {
		return nil, err
	}
	return &Function{dev: m.dev, h: *h, Name: name}, nil
}

// Device returns the function's device.
func (f *Function) Device() *Device { return f.dev }

// AllowDependentLaunch declares that the kernel waits for the grids queued
// before it (griddepcontrol.wait) before it reads or writes global memory,
// so that Launch may start it as a dependent launch on a stream set for
// them (Stream.SetDependentLaunch). Without it, Launch starts the kernel
// after the one before it ends, on any stream. Call it once, before the
// function is shared; jit marks the kernels it builds for dependent streams.
func (f *Function) AllowDependentLaunch() { f.dependentOK = true }

// DependentLaunchAllowed reports whether AllowDependentLaunch was called.
func (f *Function) DependentLaunchAllowed() bool { return f.dependentOK }

// FuncAttr is a CUfunction_attribute.
type FuncAttr int

// Function attributes.
const (
	FuncMaxThreadsPerBlock   FuncAttr = 0
	FuncSharedSizeBytes      FuncAttr = 1
	FuncLocalSizeBytes       FuncAttr = 3
	FuncNumRegs              FuncAttr = 4
	FuncMaxDynamicShared     FuncAttr = 8
	FuncNonPortableClusterOK FuncAttr = 14
)

// Attribute reads a function attribute.
func (f *Function) Attribute(a FuncAttr) (int, error) {
	if err := f.dev.bind(); err != nil {
		return 0, err
	}
	defer unbind()
	v := new(int32)
	err := newError("cuFuncGetAttribute", cuFuncGetAttribute.call(ptr(v), uintptr(a), f.h))
	return int(*v), err
}

// SetAttribute sets a function attribute.
func (f *Function) SetAttribute(a FuncAttr, v int) error {
	if err := f.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuFuncSetAttribute", cuFuncSetAttribute.call(f.h, uintptr(a), uintptr(v)))
}

// SetMaxDynamicShared raises (or lowers) the dynamic shared memory a launch of
// f may ask for; above 48 KiB this is required.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	return f.SetAttribute(FuncMaxDynamicShared, bytes)
}

// ReserveShared makes launches of f with dynamic bytes of dynamic shared
// memory valid. A block gets 48 KiB (Props.SharedPerBlock) without opting in,
// and that covers the kernel's static shared memory too: where static plus
// dynamic exceeds it, ReserveShared raises f's limit to dynamic (which must
// then fit Props.SharedPerBlockOptin with the static part). It remembers the
// largest size reserved, so that calls after the first cost an atomic load
// where nothing changes. Safe for concurrent use.
func (f *Function) ReserveShared(dynamic int) error {
	if int64(dynamic) <= f.reserved.Load() {
		return nil
	}
	f.reservedMu.Lock()
	defer f.reservedMu.Unlock()
	if int64(dynamic) <= f.reserved.Load() {
		return nil
	}
	static, err := f.Attribute(FuncSharedSizeBytes)
	if err != nil {
		return err
	}
	free := f.dev.Props().SharedPerBlock - static // what needs no opt-in
	if dynamic > free {
		if err := f.SetMaxDynamicShared(dynamic); err != nil {
			return err
		}
		free = dynamic
	}
	f.reserved.Store(int64(max(free, dynamic)))
	return nil
}

// MaxActiveBlocksPerSM returns how many blocks of the given size and dynamic
// shared memory fit on one multiprocessor at once.
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynShared int) (int, error) {
	if err := f.dev.bind(); err != nil {
		return 0, err
	}
	defer unbind()
	v := new(int32)
	err := newError("cuOccupancyMaxActiveBlocksPerMultiprocessor",
		cuOccupancyMaxBlocks.call(ptr(v), f.h, uintptr(blockSize), uintptr(dynShared)))
	return int(*v), err
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional Dim3.
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// LaunchConfig says how to launch a kernel.
type LaunchConfig struct {
	Grid, Block Dim3
	Shared      int     // dynamic shared memory bytes
	Stream      *Stream // nil: the legacy default stream
	Cluster     Dim3    // thread-block cluster size; zero: no cluster
}

const maxArgs = 32

// Args holds a kernel's arguments. Take one with NewArgs, add arguments in the
// kernel's parameter order, and hand it to Launch, which returns it to a pool:
// in steady state building and launching allocates nothing.
type Args struct {
	vals [maxArgs]uint64
	maps [2]TensorMap
	ptrs [maxArgs]unsafe.Pointer
	n    int
	nmap int
}

var argsPool = sync.Pool{New: func() any { return new(Args) }}

// NewArgs takes an empty argument list from the pool.
func NewArgs() *Args {
	a := argsPool.Get().(*Args)
	a.n, a.nmap = 0, 0
	return a
}

func (a *Args) put(v uint64) *Args {
	if a.n == maxArgs {
		panic("cuda: too many kernel arguments")
	}
	a.vals[a.n] = v
	a.ptrs[a.n] = unsafe.Pointer(&a.vals[a.n])
	a.n++
	return a
}

// Ptr adds a device pointer.
func (a *Args) Ptr(p DevicePtr) *Args { return a.put(uint64(p)) }

// I32 adds an int.
func (a *Args) I32(v int32) *Args { return a.put(uint64(uint32(v))) }

// U32 adds an unsigned int.
func (a *Args) U32(v uint32) *Args { return a.put(uint64(v)) }

// I64 adds a long long.
func (a *Args) I64(v int64) *Args { return a.put(uint64(v)) }

// F32 adds a float.
func (a *Args) F32(v float32) *Args { return a.put(uint64(math.Float32bits(v))) }

// Map adds a tensor map passed by value (a __grid_constant__ CUtensorMap).
func (a *Args) Map(m *TensorMap) *Args {
	if a.nmap == len(a.maps) || a.n == maxArgs {
		panic("cuda: too many tensor-map arguments")
	}
	a.maps[a.nmap] = *m
	a.ptrs[a.n] = unsafe.Pointer(&a.maps[a.nmap])
	a.nmap++
	a.n++
	return a
}

// Release returns an argument list that will not be launched to the pool.
func (a *Args) Release() { argsPool.Put(a) }

// cuLaunchConfig mirrors CUlaunchConfig.
type cuLaunchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	_                      uint32
	stream                 uintptr
	attrs                  uintptr
	numAttrs               uint32
	_                      uint32
}

// cuLaunchAttribute mirrors CUlaunchAttribute: a 4-byte id, padding to 8,
// and a 64-byte value union.
type cuLaunchAttribute struct {
	id    uint32
	_     uint32
	value [16]uint32
}

// Launch attribute ids (CUlaunchAttributeID).
const (
	launchAttrClusterDimension                = 4
	launchAttrProgrammaticStreamSerialization = 6
)

// exState holds the structs cuLaunchKernelEx reads, pooled so a launch with a
// cluster or a dependent launch allocates nothing either.
type exState struct {
	cfg   cuLaunchConfig
	attrs [2]cuLaunchAttribute
}

var exPool = sync.Pool{New: func() any { return new(exState) }}

// Launch queues the kernel with the given arguments and returns a to the pool.
// A config with a Cluster, or a dependent launch (a function that allows
// them on a stream set for them), goes through cuLaunchKernelEx.
func (f *Function) Launch(cfg LaunchConfig, a *Args) error {
	var stream uintptr
	dependent := false
	if cfg.Stream != nil {
		stream, dependent = cfg.Stream.h, cfg.Stream.dependent && f.dependentOK
	}
	if err := f.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	defer argsPool.Put(a)
	params := ptr(&a.ptrs[0])
	if cfg.Cluster == (Dim3{}) && !dependent {
		return newError("cuLaunchKernel", cuLaunchKernel.call(f.h,
			uintptr(cfg.Grid.X), uintptr(cfg.Grid.Y), uintptr(cfg.Grid.Z),
			uintptr(cfg.Block.X), uintptr(cfg.Block.Y), uintptr(cfg.Block.Z),
			uintptr(cfg.Shared), stream, params, 0))
	}
	ex := exPool.Get().(*exState)
	defer exPool.Put(ex)
	ex.set(cfg, stream, dependent)
	return newError("cuLaunchKernelEx", cuLaunchKernelEx.call(ptr(&ex.cfg), f.h, params, 0))
}

// set fills ex with cfg on stream, with its cluster (when not zero) and the
// permission to start before the previous kernel ends (when dependent) as
// the attributes.
func (ex *exState) set(cfg LaunchConfig, stream uintptr, dependent bool) {
	ex.cfg = cuLaunchConfig{
		gridX: cfg.Grid.X, gridY: cfg.Grid.Y, gridZ: cfg.Grid.Z,
		blockX: cfg.Block.X, blockY: cfg.Block.Y, blockZ: cfg.Block.Z,
		shared: uint32(cfg.Shared), stream: stream,
	}
	n := 0
	if cfg.Cluster != (Dim3{}) {
		ex.attrs[n] = cuLaunchAttribute{id: launchAttrClusterDimension}
		ex.attrs[n].value[0], ex.attrs[n].value[1], ex.attrs[n].value[2] = cfg.Cluster.X, cfg.Cluster.Y, cfg.Cluster.Z
		n++
	}
	if dependent {
		ex.attrs[n] = cuLaunchAttribute{id: launchAttrProgrammaticStreamSerialization}
		ex.attrs[n].value[0] = 1
		n++
	}
	if n > 0 {
		ex.cfg.attrs, ex.cfg.numAttrs = ptr(&ex.attrs[0]), uint32(n)
	}
}

// MaxActiveClusters returns how many clusters of a launch with cfg (its
// Cluster, Block and Shared; Grid a whole number of clusters; Stream
// ignored) can run on the device at once: the clusters of one wave, which
// can be fewer than the SMs over the cluster size, since a cluster's blocks
// must share one GPC. The function's attributes that the launch needs
// (dynamic shared memory over 48 KiB, clusters over 8 blocks) must be set
// first.
func (f *Function) MaxActiveClusters(cfg LaunchConfig) (int, error) {
	if err := f.dev.bind(); err != nil {
		return 0, err
	}
	defer unbind()
	ex := exPool.Get().(*exState)
	defer exPool.Put(ex)
	ex.set(cfg, 0, false)
	v := new(int32)
	err := newError("cuOccupancyMaxActiveClusters",
		cuOccupancyMaxClusters.call(ptr(v), f.h, ptr(&ex.cfg)))
	return int(*v), err
}
