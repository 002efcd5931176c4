package main

import (
	"fmt"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
)

// info prints what this machine offers the library. A missing driver, GPU
// or NVRTC is reported, not an error: the CPU path still works.
func (c *cli) info(args []string) int {
	fs := c.flags("info")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	t := &bench.Table{Header: []string{"what", "value"}, Align: "ll"}
	if v, err := cuda.DriverVersion(); err != nil {
		t.Add("driver", err.Error())
	} else {
		t.Add("driver", "CUDA "+bench.CUDAVersion(v))
	}
	if path, err := cuda.NVRTCPath(); err != nil {
		t.Add("nvrtc", err.Error())
	} else if ma, mi, err := cuda.NVRTCVersion(); err != nil {
		t.Add("nvrtc", path+": "+err.Error())
	} else {
		t.Add("nvrtc", fmt.Sprintf("%d.%d (%s)", ma, mi, path))
	}
	dev, devErr := cuda.Default()
	if devErr == nil {
		n, _ := cuda.DeviceCount()
		p := dev.Props()
		t.Add("device", fmt.Sprintf("0 of %d: %s", n, p.Name))
		t.Add("compute capability", fmt.Sprintf("%d.%d (%s)", p.Major, p.Minor, p.Arch()))
		t.Add("SMs", fmt.Sprint(p.SMs))
		t.Add("shared memory per block", fmt.Sprintf("%d KiB opt-in (%d KiB default), %d KiB per SM",
			p.SharedPerBlockOptin>>10, p.SharedPerBlock>>10, p.SharedPerSM>>10))
		t.Add("L2", fmt.Sprintf("%d MiB", p.L2Bytes>>20))
		t.Add("memory", fmt.Sprintf("%.1f GiB, %d-bit bus", float64(p.TotalMem)/(1<<30), p.MemBusWidth))
	} else {
		t.Add("device", devErr.Error())
	}
	if dir := jit.CacheDir(); dir != "" {
		t.Add("jit cache", dir)
	} else {
		t.Add("jit cache", "off (no user cache directory; set "+jit.EnvCacheDir+")")
	}
	if err := t.WriteText(c.stdout); err != nil {
		return exitFail
	}
	if devErr != nil {
		fmt.Fprintln(c.stdout, "CPU path only")
	}
	return exitOK
}
