package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/gokittens/kittens/cuda"
)

// Env describes the machine a report was measured on.
type Env struct {
	Device  string    `json:"device"` // GPU name; empty on the CPU path
	Arch    string    `json:"arch,omitempty"`
	Driver  string    `json:"driver"` // the driver's CUDA version, e.g. "13.0"; empty without one
	NVRTC   string    `json:"nvrtc"`  // NVRTC's version, e.g. "13.0"; empty without one
	Date    time.Time `json:"date"`
	CopyGBs float64   `json:"copy_gbs,omitempty"` // CopyBandwidth, when measured
	// L2Reset: every case began with L2's persisting lines reset, as
	// Measure does; older runs' JSON lacks it.
	L2Reset bool `json:"l2_reset,omitempty"`
	// DefaultStream: ours were timed on the legacy default stream, as
	// PyTorch's are and Measure does; older runs' JSON lacks it: they timed
	// ours on a stream of their own.
	DefaultStream bool `json:"default_stream,omitempty"`
	// Graph: every case, ours and PyTorch's, was timed inside CUDA graphs
	// of at least this many launches (Options.Graph); 0: one launch at a time.
	Graph int `json:"graph,omitempty"`
	// Dependent: in those graphs our kernels were dependent launches
	// (Options.Dependent).
	Dependent bool `json:"dependent_launch,omitempty"`
	// L2EvictLast: our large launches read under an L2 evict-last policy
	// (cuda.Device.SetL2EvictLast, kittens bench -evict-last); off by
	// default.
	L2EvictLast bool `json:"l2_evict_last,omitempty"`
	// Floors: each run's launch floor, in run order (one for a run; Merge
	// joins the runs'); older runs' JSON lacks them.
	Floors []LaunchFloor `json:"floors,omitempty"`
}

// LaunchFloor is one run's launch floor (see Floor): an empty kernel timed
// as the cases in our process and, where the run compared with PyTorch, in
// PyTorch's, each before the side's first case and after its last.
type LaunchFloor struct {
	Ours  FloorSpan `json:"ours"`
	Torch FloorSpan `json:"torch,omitzero"`
}

// FloorSpan is one process's launch floor before its first case and after
// its last, in µs (0: not measured); the two can differ (see Floor).
type FloorSpan struct {
	StartUS float64 `json:"start_us,omitempty"`
	EndUS   float64 `json:"end_us,omitempty"`
}

// LowestFloor is the fastest launch floor any of the runs timed in our
// process (0: none timed): no kernel launched there took less.
func (e Env) LowestFloor() float64 {
	var low float64
	for _, f := range e.Floors {
		for _, v := range []float64{f.Ours.StartUS, f.Ours.EndUS} {
			if v > 0 && (low == 0 || v < low) {
				low = v
			}
		}
	}
	return low
}

// String is "start → end" in µs, with a dash for what was not measured.
func (f FloorSpan) String() string { return num("%.2f", f.StartUS) + " → " + num("%.2f", f.EndUS) }

// CPUOnly reports whether the results came from the host path alone.
func (e Env) CPUOnly() bool { return e.Device == "" }

// Describe reads the environment of dev (nil for the CPU path) at the
// present time.
func Describe(dev *cuda.Device) Env {
	e := Env{Date: time.Now()}
	if v, err := cuda.DriverVersion(); err == nil {
		e.Driver = CUDAVersion(v)
	}
	if ma, mi, err := cuda.NVRTCVersion(); err == nil {
		e.NVRTC = fmt.Sprintf("%d.%d", ma, mi)
	}
	if dev != nil {
		p := dev.Props()
		e.Device, e.Arch, e.L2Reset, e.DefaultStream = p.Name, p.Arch(), true, true
	}
	return e
}

// graphLine says how a graph run was timed.
func (e Env) graphLine() string {
	s := fmt.Sprintf("in CUDA graphs of ≥ %d launches, time per launch", e.Graph)
	if e.Dependent {
		s += ", ours as dependent launches"
	}
	return s
}

// CUDAVersion formats a driver version number (major·1000 + minor·10) as
// "major.minor".
func CUDAVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// deviceLine names the device and its architecture.
func (e Env) deviceLine() string {
	if e.CPUOnly() {
		return "CPU path only (no GPU used)"
	}
	if e.Arch == "" {
		return e.Device
	}
	return e.Device + " (" + e.Arch + ")"
}

// driverLine and nvrtcLine name the versions, or say there is none.
func (e Env) driverLine() string { return orNone("driver CUDA ", e.Driver, "no driver") }
func (e Env) nvrtcLine() string  { return orNone("NVRTC ", e.NVRTC, "no NVRTC") }

func orNone(prefix, v, none string) string {
	if v == "" {
		return none
	}
	return prefix + v
}

// String is the one-line summary that heads every report.
func (e Env) String() string {
	s := fmt.Sprintf("%s · %s · %s · %s", e.deviceLine(), e.driverLine(), e.nvrtcLine(), e.Date.Format(time.DateOnly))
	if e.CopyGBs > 0 {
		s += fmt.Sprintf(" · copy %.0f GB/s", e.CopyGBs)
	}
	if e.Graph > 0 {
		s += " · " + e.graphLine()
	}
	if len(e.Floors) > 0 {
		s += " · launch floor " + e.floorLine()
	}
	return s
}

// floorLine lists the runs' launch floors, ours then PyTorch's.
func (e Env) floorLine() string {
	var ours, torch []string
	anyTorch := false
	for _, f := range e.Floors {
		ours = append(ours, f.Ours.String())
		if f.Torch != (FloorSpan{}) {
			torch, anyTorch = append(torch, f.Torch.String()), true
		} else {
			torch = append(torch, dash)
		}
	}
	s := "ours " + strings.Join(ours, ", ") + " µs"
	if anyTorch {
		s += ", PyTorch's " + strings.Join(torch, ", ") + " µs"
	}
	return s
}

// Table lays the environment out as rows of what and value, for the head of
// a markdown report.
func (e Env) Table() *Table {
	t := &Table{Header: []string{"", ""}}
	t.Add("device", e.deviceLine())
	t.Add("driver", orNone("CUDA ", e.Driver, "none"))
	t.Add("NVRTC", orNone("", e.NVRTC, "none"))
	t.Add("date", e.Date.Format(time.DateOnly))
	if e.CopyGBs > 0 {
		t.Add("copy bandwidth", fmt.Sprintf("%.0f GB/s (device-to-device, bytes read + written)", e.CopyGBs))
	}
	if e.Graph > 0 {
		t.Add("timing", e.graphLine())
	}
	if e.L2EvictLast {
		t.Add("L2 evict-last reads", "on (large launches read under an L2 evict-last policy)")
	}
	if len(e.Floors) > 0 {
		what := "an empty kernel timed as the cases, before the first and after the last"
		if len(e.Floors) > 1 {
			what += ", each run's"
		}
		t.Add("launch floor", e.floorLine()+" ("+what+")")
	}
	return t
}
