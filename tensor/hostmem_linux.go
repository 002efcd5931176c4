package tensor

import "syscall"

// physicalMemory is the machine's total RAM, from sysinfo(2); 0 if the
// call fails.
func physicalMemory() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
