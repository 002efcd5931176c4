package rope

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/include"
	"github.com/gokittens/kittens/tensor"
)

// registers reads the register count and stack frame of a kernel from a
// CUBIN (an ELF file whose version field debug/elf rejects): the
// EIATTR_REGCOUNT and EIATTR_FRAME_SIZE records of its .nv.info section.
func registers(cubin []byte) (regs, frame int, err error) {
	le := binary.LittleEndian
	if len(cubin) < 64 {
		return 0, 0, fmt.Errorf("short CUBIN")
	}
	shoff, shnum, strndx := le.Uint64(cubin[0x28:]), int(le.Uint16(cubin[0x3c:])), int(le.Uint16(cubin[0x3e:]))
	sh := func(i int) []byte { return cubin[shoff+uint64(i)*64:][:64] }
	strtab := cubin[le.Uint64(sh(strndx)[24:]):]
	regs, frame = -1, -1
	for i := range shnum {
		h := sh(i)
		name := strtab[le.Uint32(h):]
		if string(name[:bytes.IndexByte(name, 0)]) != ".nv.info" {
			continue
		}
		info := cubin[le.Uint64(h[24:]):][:le.Uint64(h[32:])]
		for len(info) >= 4 {
			if info[0] != 4 { // not EIFMT_SVAL: no payload
				info = info[4:]
				continue
			}
			attr, n := info[1], int(le.Uint16(info[2:]))
			switch {
			case attr == 0x2f && n == 8:
				regs = int(le.Uint32(info[8:]))
			case attr == 0x11 && n == 8:
				frame = int(le.Uint32(info[8:]))
			}
			info = info[4+n:]
		}
	}
	return regs, frame, nil
}

// TestKernelsCompile compiles, with NVRTC alone (no GPU needed), the
// specializations the pickers yield for every dtype pair, style and vector
// width, for the architecture named by KITTENS_NVRTC_ARCH (e.g. sm_90a;
// sm_90 for an older NVRTC), and logs each one's registers and stack frame
// (a frame means spills). Skipped when the variable is unset.
func TestKernelsCompile(t *testing.T) {
	arch := os.Getenv("KITTENS_NVRTC_ARCH")
	if arch == "" {
		t.Skip("set KITTENS_NVRTC_ARCH (e.g. sm_90a) to compile the specializations with NVRTC")
	}
	var specs []spec
	for _, p := range dtypePairs {
		for _, style := range []Style{NeoX, GPTJ} {
			w := map[Style]int{NeoX: 1, GPTJ: 2}[style]
			for v := 1; v*w*p[0].Size() <= 16; v *= 2 {
				base := spec{dt: p[0], cdt: p[1], style: style, v: v, da: min(w*v*p[0].Size(), 16)}
				for _, pos := range []tensor.DType{tensor.I64, tensor.I32} {
					qk := base
					qk.pos, qk.hpt, qk.cs, qk.maxT, qk.minB = pos, 4, true, 128, 8
					flat := qk
					flat.hpt, flat.minB, flat.flat = min(4, max(1, flatBytes/(2*v*p[0].Size()))), 12, true
					specs = append(specs, qk, flat)
				}
				bhsd := base
				bhsd.hpt, bhsd.pass, bhsd.wide = 1, 16/p[0].Size(), true
				specs = append(specs, bhsd)
			}
			if style == GPTJ { // odd strides: pairs split in two
				specs = append(specs, spec{dt: p[0], cdt: p[1], style: style, v: 1, da: p[0].Size(), hpt: 1, pass: 1})
			}
		}
	}
	for _, sp := range specs {
		kern := sp.kernel()
		// as jit hands it to NVRTC: the defines as #define lines first.
		// NVRTC 11.8 lacks __builtin_memcpy (kittens.cuh uses it); memcpy
		// stands in so that an older NVRTC can check this kernel too.
		var src strings.Builder
		src.WriteString("#define __builtin_memcpy memcpy\n")
		for _, d := range kern.Defines {
			name, value, _ := strings.Cut(d, "=")
			fmt.Fprintf(&src, "#define %s %s\n", name, value)
		}
		src.WriteString(kern.Source)
		bin, err := cuda.CompileCUBIN(kern.File, src.String(), include.Headers(), []string{"-arch=" + arch, "-std=c++17", "-default-device"})
		if err != nil {
			t.Errorf("%v: %v", kern, err)
			continue
		}
		regs, frame, err := registers(bin)
		if err != nil {
			t.Errorf("%v: %v", kern, err)
			continue
		}
		t.Logf("%v: %d registers, %d-byte frame", kern, regs, frame)
	}
}
