package tensor

import (
	"fmt"
	"strconv"
	"sync"
)

// hostMemory is the machine's physical memory in bytes, read once; 0 where
// it cannot be read.
var hostMemory = sync.OnceValue(physicalMemory)

// checkHost refuses host storage of n bytes for a tensor of dtype dt and
// the given shape where n exceeds the machine's physical memory. Go's
// runtime does not fail such an allocation with a panic to recover from:
// the system refuses the memory and the process dies ("out of memory").
func checkHost(dt DType, shape []int, n int) error {
	if m := hostMemory(); m > 0 && uint64(n) > m {
		return fmt.Errorf("tensor: %v%v needs %d bytes (%s) of host memory, more than the %s this machine has",
			dt, shape, n, byteSize(uint64(n)), byteSize(m))
	}
	return nil
}

// byteSize formats n bytes for a person: 512 B, 1.5 KiB, 62.8 GiB, 32 TiB.
func byteSize(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	f, unit := float64(n)/1024, 0
	for f >= 1024 && unit < 5 {
		f /= 1024
		unit++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + "KMGTPE"[unit:unit+1] + "iB"
}
