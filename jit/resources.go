package jit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Resources reads the registers per thread and the stack frame in bytes (a
// frame means spills or local arrays) of the kernels in a CUBIN, from the
// EIATTR_REGCOUNT and EIATTR_FRAME_SIZE records of its .nv.info sections.
// A CUBIN is an ELF file whose version field debug/elf rejects, so the few
// fields needed are read by hand. With several kernels the largest values
// are returned; -1 where no record was found. Malformed input is an error,
// never a panic.
func Resources(cubin []byte) (regs, frame int, err error) {
	le := binary.LittleEndian
	if len(cubin) < 64 || string(cubin[:4]) != "\x7fELF" {
		return 0, 0, errors.New("jit: not a CUBIN")
	}
	size := uint64(len(cubin))
	shoff, shnum, strndx := le.Uint64(cubin[0x28:]), int(le.Uint16(cubin[0x3c:])), int(le.Uint16(cubin[0x3e:]))
	if shoff > size || uint64(shnum)*64 > size-shoff { // shnum*64 < 2²², no overflow
		return 0, 0, fmt.Errorf("jit: CUBIN section headers (%d at offset %d) run past the end of its %d bytes", shnum, shoff, size)
	}
	if strndx >= shnum {
		return 0, 0, fmt.Errorf("jit: CUBIN names section %d of %d as its name table", strndx, shnum)
	}
	header := func(i int) []byte { return cubin[shoff+uint64(i)*64:][:64] }
	// contents is the data of section i, the header h.
	contents := func(i int, h []byte) ([]byte, error) {
		off, n := le.Uint64(h[24:]), le.Uint64(h[32:])
		if off > size || n > size-off {
			return nil, fmt.Errorf("jit: CUBIN section %d (%d bytes at offset %d) runs past the end of its %d bytes", i, n, off, size)
		}
		return cubin[off:][:n], nil
	}
	names, err := contents(strndx, header(strndx))
	if err != nil {
		return 0, 0, err
	}
	regs, frame = -1, -1
	for i := range shnum {
		h := header(i)
		nameOff := uint64(le.Uint32(h))
		if nameOff >= uint64(len(names)) {
			return 0, 0, fmt.Errorf("jit: CUBIN section %d: name at offset %d of a %d-byte name table", i, nameOff, len(names))
		}
		name := names[nameOff:]
		if end := bytes.IndexByte(name, 0); end >= 0 {
			name = name[:end]
		}
		if string(name) != ".nv.info" && !bytes.HasPrefix(name, []byte(".nv.info.")) {
			continue
		}
		info, err := contents(i, h)
		if err != nil {
			return 0, 0, err
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
