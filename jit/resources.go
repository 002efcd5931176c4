package jit

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Resources reads the registers per thread and the stack frame in bytes (a
// frame means spills or local arrays) of the kernels in a CUBIN, from the
// EIATTR_REGCOUNT and EIATTR_FRAME_SIZE records of its .nv.info sections.
// A CUBIN is an ELF file whose version field debug/elf rejects, so the few
// fields needed are read by hand. With several kernels the largest values
// are returned; -1 where no record was found.
func Resources(cubin []byte) (regs, frame int, err error) {
	le := binary.LittleEndian
	if len(cubin) < 64 || string(cubin[:4]) != "\x7fELF" {
		return 0, 0, fmt.Errorf("jit: not a CUBIN")
	}
	shoff, shnum, strndx := le.Uint64(cubin[0x28:]), int(le.Uint16(cubin[0x3c:])), int(le.Uint16(cubin[0x3e:]))
	if shoff+uint64(shnum)*64 > uint64(len(cubin)) || strndx >= shnum {
		return 0, 0, fmt.Errorf("jit: truncated CUBIN")
	}
	section := func(i int) (name string, data []byte, err error) {
		h := cubin[shoff+uint64(i)*64:][:64]
		str := cubin[le.Uint64(cubin[shoff+uint64(strndx)*64+24:]):]
		off, size := le.Uint64(h[24:]), le.Uint64(h[32:])
		if off+size > uint64(len(cubin)) {
			return "", nil, fmt.Errorf("jit: truncated CUBIN section")
		}
		str = str[le.Uint32(h):]
		if end := bytes.IndexByte(str, 0); end >= 0 {
			str = str[:end]
		}
		return string(str), cubin[off:][:size], nil
	}
	regs, frame = -1, -1
	for i := range shnum {
		name, info, err := section(i)
		if err != nil {
			return 0, 0, err
		}
		if name != ".nv.info" && !bytes.HasPrefix([]byte(name), []byte(".nv.info.")) {
			continue
		}
		for len(info) >= 4 {
			format, attr, n := info[0], info[1], int(le.Uint16(info[2:]))
			if format != 4 { // not EIFMT_SVAL: the 2 bytes after the attribute are the value
				info = info[4:]
				continue
			}
			if len(info) < 4+n {
				break
			}
			if n == 8 { // a function index, then the value
				v := int(le.Uint32(info[8:]))
				switch attr {
				case 0x2f: // EIATTR_REGCOUNT
					regs = max(regs, v)
				case 0x11: // EIATTR_FRAME_SIZE
					frame = max(frame, v)
				}
			}
			info = info[4+n:]
		}
	}
	return regs, frame, nil
}
