package tensor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The .npy format (NumPy's numpy.lib.format): the magic string, a major and
// a minor version byte, the header length (uint16 in version 1.0, uint32 in
// 2.0 and 3.0, little-endian), a header that is a Python dict literal with
// the keys descr, fortran_order and shape, padded with spaces and ended by
// a newline so that the data starts at a multiple of 64 bytes, then the
// elements in C order.
const (
	npyMagic      = "\x93NUMPY"
	npyAlign      = 64
	npyMaxHeader  = 1 << 20 // refuse larger headers rather than allocate them
	npyDirectRead = 64 << 20
	// npyGrowthDigits is the width NumPy leaves for the first dimension.
	npyGrowthDigits = 21
)

// npyDescr is the .npy type string written for each dtype. NumPy has no
// bfloat16 or fp8: their bits travel as unsigned integers of the same size.
var npyDescr = map[DType]string{
	F32: "<f4", F16: "<f2", BF16: "<u2",
	F8E4M3: "|u1", F8E5M2: "|u1",
	I8: "|i1", U8: "|u1", I32: "<i4", I64: "<i8",
}

// npyDType is the dtype ReadNPY returns for each type string it accepts.
var npyDType = map[string]DType{
	"<f4": F32, "<f2": F16, "<u2": BF16,
	"|i1": I8, "<i1": I8, "|u1": U8, "<u1": U8,
	"<i4": I32, "<i8": I64,
}

// WriteNPY writes t to w in the .npy format, version 1.0 (2.0 only if the
// header does not fit in 1.0's 65535 bytes), little-endian, C order, with
// the header padded as numpy.save pads it so that the data starts at a
// multiple of 64 bytes. A
// strided tensor is written densely, in logical row-major order; a device
// tensor is first copied to the host with ToHost.
//
// The type strings are '<f4' (F32), '<f2' (F16), '|i1' (I8), '|u1' (U8),
// '<i4' (I32) and '<i8' (I64). NumPy has no bfloat16: BF16 is written as its
// bits, '<u2', and PyTorch recovers the tensor with
// torch.from_numpy(a).view(torch.bfloat16). Likewise the fp8 dtypes are
// written as their bytes, '|u1' (torch.from_numpy(a).view(torch.float8_e4m3fn)
// or view(torch.float8_e5m2)); the file does not say which fp8 format it
// holds.
func WriteNPY(w io.Writer, t *Tensor) error {
	if t == nil {
		return errors.New("tensor: WriteNPY of a nil tensor")
	}
	descr, ok := npyDescr[t.dtype]
	if !ok {
		return fmt.Errorf("tensor: WriteNPY of dtype %v", t.dtype)
	}
	if t.IsDevice() {
		h, err := t.ToHost()
		if err != nil {
			return fmt.Errorf("tensor: WriteNPY: %w", err)
		}
		t = h
	}
	bw := bufio.NewWriter(w)
	bw.Write(npyHeader(descr, t.shape))
	size := t.dtype.Size()
	if t.Contiguous() {
		bw.Write(t.host[:t.Numel()*size])
	} else {
		row := t.shape[len(t.shape)-1] // a strided tensor has rank ≥ 2
		t.offsets(func(i, off int) {
			if i%row == 0 {
				bw.Write(t.host[off*size : (off+row)*size])
			}
		})
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tensor: WriteNPY: %w", err)
	}
	return nil
}

// npyHeader returns the magic, version, header length and padded header
// for an array of type descr and the given shape, byte for byte as
// numpy.save (NumPy ≥ 1.23) writes them: the dict, spare spaces that let
// the first dimension grow to 21 digits in place, then spaces up to one
// byte before a multiple of 64 (a whole 64 when already there) and a
// newline.
func npyHeader(descr string, shape []int) []byte {
	var dims strings.Builder
	for i, d := range shape {
		if i > 0 {
			dims.WriteString(", ")
		}
		dims.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		dims.WriteString(",") // (n,) is a tuple; (n) is not
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims.String())
	if len(shape) > 0 {
		dict += strings.Repeat(" ", max(npyGrowthDigits-len(strconv.Itoa(shape[0])), 0))
	}
	for _, lenSize := range []int{2, 4} {
		pre := len(npyMagic) + 2 + lenSize
		hlen := len(dict) + 1 // the newline
		hlen += npyAlign - (pre+hlen)%npyAlign
		if lenSize == 2 && hlen > 0xffff {
			continue
		}
		b := make([]byte, 0, pre+hlen)
		b = append(b, npyMagic...)
		if lenSize == 2 {
			b = append(b, 1, 0)
			b = binary.LittleEndian.AppendUint16(b, uint16(hlen))
		} else {
			b = append(b, 2, 0)
			b = binary.LittleEndian.AppendUint32(b, uint32(hlen))
		}
		b = append(b, dict...)
		for len(b) < pre+hlen-1 {
			b = append(b, ' ')
		}
		return append(b, '\n')
	}
	panic("unreachable: a version 2.0 header holds any shape")
}

// ReadNPY reads an array in the .npy format, versions 1.0, 2.0 and 3.0,
// little-endian and C order, into a contiguous host tensor. It reads the
// type strings WriteNPY writes: '<u2' becomes BF16 (the library has no
// 16-bit integer, so bfloat16 files round trip), '|u1' becomes U8, which
// an fp8 caller reinterprets with View:
//
//	u, _ := tensor.ReadNPY(r)
//	f, _ := u.View(tensor.F8E4M3, u.Shape(), u.Strides())
//
// Other types (float64, big-endian, structured), Fortran order and
// malformed or truncated files are errors that say what was wrong, as is
// an array larger than the machine's memory. ReadNPY reads no further than
// the end of the array's data.
func ReadNPY(r io.Reader) (*Tensor, error) {
	if r == nil {
		return nil, errors.New("tensor: ReadNPY from a nil io.Reader")
	}
	return readNPY(r, -1)
}

// readNPY reads a .npy stream; avail is how many bytes r holds, or -1 when
// that is unknown.
func readNPY(r io.Reader, avail int64) (*Tensor, error) {
	fail := func(format string, a ...any) (*Tensor, error) {
		return nil, fmt.Errorf("tensor: ReadNPY: "+format, a...)
	}
	var pre [len(npyMagic) + 2]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return fail("reading the magic string: %w", eof(err))
	}
	if string(pre[:len(npyMagic)]) != npyMagic {
		return fail("not a .npy file (magic %q, want %q)", pre[:len(npyMagic)], npyMagic)
	}
	major, minor := pre[len(npyMagic)], pre[len(npyMagic)+1]
	lenSize := 0
	switch {
	case major == 1 && minor == 0:
		lenSize = 2
	case (major == 2 || major == 3) && minor == 0:
		lenSize = 4
	default:
		return fail("unsupported format version %d.%d", major, minor)
	}
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:lenSize]); err != nil {
		return fail("reading the header length: %w", eof(err))
	}
	hlen := int64(binary.LittleEndian.Uint32(lb[:]))
	if hlen > npyMaxHeader {
		return fail("header of %d bytes is longer than the %d allowed", hlen, npyMaxHeader)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return fail("reading the %d-byte header: %w", hlen, eof(err))
	}
	descr, fortran, shape, err := parseNPYHeader(string(header))
	if err != nil {
		return fail("header %q: %v", strings.TrimSpace(string(header)), err)
	}
	dt, ok := npyDType[descr]
	if !ok {
		hint := ""
		if strings.HasPrefix(descr, ">") {
			hint = " (big-endian data is not supported)"
		} else if descr == "<f8" {
			hint = " (convert with a.astype(numpy.float32))"
		}
		return fail("unsupported descr %q%s", descr, hint)
	}
	if fortran {
		return fail("fortran_order True is not supported; save a C-order array (numpy.ascontiguousarray)")
	}
	n, err := checkLayout(dt, shape, ContiguousStrides(shape))
	if err == nil {
		err = checkHost(dt, shape, n)
	}
	if err != nil {
		return fail("shape %v: %v", shape, err)
	}
	if used := int64(len(pre) + lenSize + len(header)); avail >= 0 && avail-used < int64(n) {
		return fail("truncated: %v%v needs %d bytes of data, the file has %d", dt, shape, n, avail-used)
	}
	data, err := readData(r, n, avail >= 0)
	if err != nil {
		return fail("%v%v: %w", dt, shape, err)
	}
	return &Tensor{dtype: dt, shape: shape, strides: ContiguousStrides(shape), host: data}, nil
}

// readData reads exactly n bytes. Unless the caller knows r holds them
// (sure), a large n is read in growing steps, so that a truncated stream
// with a huge shape fails without allocating all of it first.
func readData(r io.Reader, n int, sure bool) ([]byte, error) {
	if sure || n <= npyDirectRead {
		b := make([]byte, n)
		if got, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("truncated data: %d of %d bytes: %w", got, n, eof(err))
		}
		return b, nil
	}
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(r, int64(n)))
	if err == nil && got < int64(n) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("truncated data: %d of %d bytes: %w", got, n, err)
	}
	return buf.Bytes()[:n:n], nil
}

// eof turns a clean end of input, which in the middle of a file means it
// was cut short, into io.ErrUnexpectedEOF.
func eof(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseNPYHeader reads the header dict: {'descr': str, 'fortran_order':
// bool, 'shape': tuple of ints}, each key exactly once, in any order,
// trailing commas allowed.
func parseNPYHeader(h string) (descr string, fortran bool, shape []int, err error) {
	p := &npyParser{s: strings.TrimSpace(h)}
	seen := map[string]bool{}
	p.expect('{')
	for p.err == nil && !p.accept('}') {
		key := p.str()
		p.expect(':')
		if p.err != nil {
			break
		}
		if seen[key] {
			return "", false, nil, fmt.Errorf("key %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "descr":
			descr = p.str()
		case "fortran_order":
			fortran = p.boolean()
		case "shape":
			shape = p.tuple()
		default:
			return "", false, nil, fmt.Errorf("unexpected key %q", key)
		}
		if !p.accept(',') {
			p.expect('}')
			break
		}
	}
	if p.err == nil && p.pos != len(p.s) {
		p.fail("text after the dict")
	}
	if p.err != nil {
		return "", false, nil, p.err
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", false, nil, fmt.Errorf("no %q key", k)
		}
	}
	return descr, fortran, shape, nil
}

// npyParser reads the Python literals of a .npy header. After the first
// error every method does nothing and returns a zero value.
type npyParser struct {
	s   string
	pos int
	err error
}

func (p *npyParser) fail(format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("at byte %d: %s", p.pos, fmt.Sprintf(format, a...))
	}
}

func (p *npyParser) skipSpace() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

// accept consumes c if it comes next.
func (p *npyParser) accept(c byte) bool {
	p.skipSpace()
	if p.err == nil && p.pos < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *npyParser) expect(c byte) {
	if !p.accept(c) {
		p.fail("want %q", c)
	}
}

// str reads a quoted string without escapes, as NumPy writes them.
func (p *npyParser) str() string {
	p.skipSpace()
	if p.err != nil || p.pos >= len(p.s) || (p.s[p.pos] != '\'' && p.s[p.pos] != '"') {
		p.fail("want a quoted string")
		return ""
	}
	q := p.s[p.pos]
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		p.fail("unterminated string")
		return ""
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	p.pos += end + 2
	return v
}

// word reads a run of letters, digits and underscores.
func (p *npyParser) word() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
			break
		}
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *npyParser) boolean() bool {
	if p.err != nil {
		return false
	}
	switch w := p.word(); w {
	case "True":
		return true
	case "False":
		return false
	default:
		p.fail("want True or False, got %q", w)
		return false
	}
}

// tuple reads a tuple of non-negative integers: (), (n,), (n, m), ...
// The parenthesized integer (n) is taken as (n,).
func (p *npyParser) tuple() []int {
	p.expect('(')
	shape := []int{}
	for p.err == nil && !p.accept(')') {
		w := p.word()
		d, err := strconv.Atoi(w)
		if err != nil || d < 0 {
			p.fail("want a dimension, got %q", w)
			return nil
		}
		shape = append(shape, d)
		if !p.accept(',') {
			p.expect(')')
			break
		}
	}
	return shape
}

// SaveNPY writes t to the file at path in the .npy format (see WriteNPY),
// replacing the file if it exists. A failed write removes the file.
func SaveNPY(path string, t *Tensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = WriteNPY(f, t)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// LoadNPY reads a .npy file (see ReadNPY). A regular file too short for the
// shape its header declares is an error before any data is allocated; a
// named pipe or a device (/dev/stdin) is read as a stream, as ReadNPY reads
// one.
func LoadNPY(path string) (*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	avail := int64(-1) // a pipe or device: its size says nothing
	if st.Mode().IsRegular() {
		avail = st.Size()
	}
	t, err := readNPY(bufio.NewReader(f), avail)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
