package tensor

import "unsafe"

func addr(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }
