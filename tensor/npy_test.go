package tensor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// npyFile assembles a .npy stream by hand: magic, version, header length
// (2 bytes for version 1, 4 otherwise), header, data.
func npyFile(major byte, header string, data []byte) []byte {
	b := []byte("\x93NUMPY")
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	}
	return append(append(b, header...), data...)
}

// TestWriteNPYGolden compares with the bytes numpy.save writes for
// np.arange(6, dtype=np.float32).reshape(2, 3): a 118-byte header (the dict,
// 58 spaces, a newline) after the 10-byte prefix, then the data.
func TestWriteNPYGolden(t *testing.T) {
	x := New(F32, 2, 3)
	x.SetFloat64s([]float64{0, 1, 2, 3, 4, 5})
	var data []byte
	for _, v := range []uint32{0, 0x3f800000, 0x40000000, 0x40400000, 0x40800000, 0x40a00000} {
		data = binary.LittleEndian.AppendUint32(data, v)
	}
	header := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + strings.Repeat(" ", 58) + "\n"
	want := npyFile(1, header, data)
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("WriteNPY wrote\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

func TestNPYHeaderLayout(t *testing.T) {
	tests := []struct {
		descr string
		shape []int
		dims  string
	}{
		{"<f4", []int{}, "()"},
		{"<f2", []int{7}, "(7,)"},
		{"|u1", []int{0, 3}, "(0, 3)"},
		{"<i8", []int{123456789, 2, 1}, "(123456789, 2, 1)"},
		{"<u2", make([]int, 30), "(0, 0, "},
	}
	for _, tt := range tests {
		h := npyHeader(tt.descr, tt.shape)
		hlen := int(binary.LittleEndian.Uint16(h[8:]))
		if len(h)%64 != 0 || len(h) != 10+hlen || h[len(h)-1] != '\n' || string(h[:8]) != "\x93NUMPY\x01\x00" {
			t.Errorf("%v: header of %d bytes, length field %d: %q", tt.shape, len(h), hlen, h)
		}
		if !strings.Contains(string(h), "'descr': '"+tt.descr+"'") || !strings.Contains(string(h), "'shape': "+tt.dims) {
			t.Errorf("%v: header %q", tt.shape, h)
		}
		descr, fortran, shape, err := parseNPYHeader(string(h[10:]))
		if err != nil || descr != tt.descr || fortran || !slices.Equal(shape, tt.shape) {
			t.Errorf("%v: parsed back as %q %v %v, %v", tt.shape, descr, fortran, shape, err)
		}
	}
	// A header too long for version 1.0 switches to 2.0.
	h := npyHeader("<f4", make([]int, 30000))
	if h[6] != 2 || len(h)%64 != 0 || int(binary.LittleEndian.Uint32(h[8:]))+12 != len(h) {
		t.Errorf("long header: version %d, %d bytes", h[6], len(h))
	}
}

func TestNPYRoundTrip(t *testing.T) {
	rng := SeededRNG(21)
	layouts := []struct{ shape, strides []int }{
		{[]int{}, []int{}},
		{[]int{5}, []int{1}},
		{[]int{3, 4}, []int{4, 1}},
		{[]int{3, 4}, []int{7, 1}},
		{[]int{2, 3, 2}, []int{9, 3, 1}},
		{[]int{0, 4}, []int{4, 1}},
	}
	for _, dt := range allDTypes {
		for _, l := range layouts {
			x, _ := NewStrided(dt, l.shape, l.strides)
			x.FillNormal(rng, 0, 50)
			var buf bytes.Buffer
			if err := WriteNPY(&buf, x); err != nil {
				t.Fatal(err)
			}
			if hlen := int(binary.LittleEndian.Uint16(buf.Bytes()[8:])); (10+hlen)%64 != 0 {
				t.Errorf("%v%v: data starts at %d", dt, l.shape, 10+hlen)
			}
			y, err := ReadNPY(&buf)
			if err != nil {
				t.Fatalf("%v%v strides %v: %v", dt, l.shape, l.strides, err)
			}
			if dt == F8E4M3 || dt == F8E5M2 { // read as bytes; the caller says which fp8
				if y.DType() != U8 {
					t.Errorf("%v: read as %v, want u8", dt, y.DType())
				}
				if y, err = y.View(dt, y.Shape(), y.Strides()); err != nil {
					t.Fatal(err)
				}
			} else if y.DType() != dt {
				t.Errorf("%v: read as %v", dt, y.DType())
			}
			if buf.Len() != 0 {
				t.Errorf("%v%v: %d bytes left unread", dt, l.shape, buf.Len())
			}
			if !slices.Equal(y.Shape(), l.shape) || !y.Contiguous() {
				t.Errorf("%v%v: read shape %v strides %v", dt, l.shape, y.Shape(), y.Strides())
			}
			if got, want := y.Float64s(), x.Float64s(); !slices.EqualFunc(got, want, same) {
				t.Errorf("%v%v strides %v: read %v, wrote %v", dt, l.shape, l.strides, got, want)
			}
			if _, err := ReadNPY(bytes.NewReader(npyHeaderFor(t, x))); err == nil && x.Numel() > 0 {
				t.Errorf("%v%v: header without data read fine", dt, l.shape)
			}
		}
	}
}

// npyHeaderFor returns just the header WriteNPY writes for x.
func npyHeaderFor(t *testing.T, x *Tensor) []byte {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()[:buf.Len()-x.Numel()*x.DType().Size()]
}

func TestReadNPYDTypes(t *testing.T) {
	tests := []struct {
		descr string
		want  DType
	}{
		{"<f4", F32}, {"<f2", F16}, {"<u2", BF16}, {"|i1", I8}, {"|u1", U8}, {"<u1", U8}, {"<i4", I32}, {"<i8", I64},
	}
	for _, tt := range tests {
		data := make([]byte, 3*tt.want.Size())
		h := "{'descr': '" + tt.descr + "', 'fortran_order': False, 'shape': (3,), }\n"
		x, err := ReadNPY(bytes.NewReader(npyFile(1, h, data)))
		if err != nil || x.DType() != tt.want || !slices.Equal(x.Shape(), []int{3}) {
			t.Errorf("%s: %v, %v; want %v[3]", tt.descr, x, err, tt.want)
		}
	}
}

// TestReadNPYVersions reads versions 2.0 and 3.0 and headers written by
// other tools: other key orders, double quotes, no padding, no trailing
// comma, a parenthesized single dimension.
func TestReadNPYVersions(t *testing.T) {
	data := []byte{1, 0, 2, 0, 3, 0, 4, 0}
	tests := []struct {
		major  byte
		header string
		shape  []int
	}{
		{2, "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }\n", nil},
		{1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 2), }", []int{2, 2}},
		{2, "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }" + strings.Repeat(" ", 100) + "\n", []int{4}},
		{3, "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 4), }\n", []int{1, 4}},
		{1, "{'shape': (4,), 'fortran_order': False, 'descr': '<u2'}", []int{4}},
		{1, `{"descr": "<u2", "fortran_order": False, "shape": (2,2)}`, []int{2, 2}},
		{1, "{'descr':'<u2','fortran_order':False,'shape':(4)}", []int{4}},
		{1, "  {'descr': '<u2',\n 'fortran_order': False,\t'shape': ( 4 , ) ,}  \n", []int{4}},
	}
	for _, tt := range tests {
		x, err := ReadNPY(bytes.NewReader(npyFile(tt.major, tt.header, data)))
		if tt.shape == nil {
			if err == nil || !strings.Contains(err.Error(), `unsupported descr "<i2"`) {
				t.Errorf("%q: error %v, want unsupported descr", tt.header, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("version %d %q: %v", tt.major, tt.header, err)
			continue
		}
		if !slices.Equal(x.Shape(), tt.shape) || x.DType() != BF16 || !bytes.Equal(x.Bytes(), data) {
			t.Errorf("version %d %q: %v%v %v", tt.major, tt.header, x.DType(), x.Shape(), x.Bytes())
		}
	}
}

func TestReadNPYErrors(t *testing.T) {
	good := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n"
	data := make([]byte, 8)
	header := func(h string) []byte { return npyFile(1, h, data) }
	tests := []struct {
		name string
		in   []byte
		err  string
	}{
		{"empty", nil, "reading the magic string: unexpected EOF"},
		{"short magic", []byte("\x93NUM"), "unexpected EOF"},
		{"bad magic", []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"), "not a .npy file"},
		{"version 1.1", []byte("\x93NUMPY\x01\x01\x00\x00"), "unsupported format version 1.1"},
		{"version 4.0", []byte("\x93NUMPY\x04\x00\x00\x00"), "unsupported format version 4.0"},
		{"no header length", []byte("\x93NUMPY\x01\x00\x10"), "reading the header length: unexpected EOF"},
		{"short header", npyFile(1, good, nil)[:30], "reading the 58-byte header: unexpected EOF"},
		{"huge header", []byte("\x93NUMPY\x02\x00\x00\x00\x00\x40"), "header of 1073741824 bytes"},
		{"short data", npyFile(1, good, data[:5]), "truncated data: 5 of 8 bytes"},
		{"no data", npyFile(1, good, nil), "truncated data: 0 of 8 bytes"},
		{"float64", header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }"), `unsupported descr "<f8" (convert with a.astype(numpy.float32))`},
		{"big-endian", header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"), `unsupported descr ">f4" (big-endian`},
		{"complex", header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"), `unsupported descr "<c8"`},
		{"bool", header("{'descr': '|b1', 'fortran_order': False, 'shape': (8,), }"), `unsupported descr "|b1"`},
		{"fortran", header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"), "fortran_order True is not supported"},
		{"not a dict", header("['<f4', False, (2,)]"), `want '{'`},
		{"missing key", header("{'descr': '<f4', 'shape': (2,), }"), `no "fortran_order" key`},
		{"extra key", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"), `unexpected key "x"`},
		{"duplicate key", header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"), `key "descr" given twice`},
		{"bad bool", header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"), `want True or False, got "0"`},
		{"negative dim", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"), "want a dimension"},
		{"float dim", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}"), "want ')'"},
		{"unterminated string", header("{'descr': '<f4, 'fortran_order': False}"), "at byte 17: want '}'"},
		{"open string", header("{'descr"), "unterminated string"},
		{"shape not a tuple", header("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"), `want '('`},
		{"unclosed dict", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"), `want '}'`},
		{"text after", header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x"), "text after the dict"},
		{"too large", header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}"), "too large"},
	}
	for _, tt := range tests {
		_, err := ReadNPY(bytes.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "tensor: ReadNPY: ") {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		}
	}
	// Truncation is an unexpected EOF to errors.Is.
	if _, err := ReadNPY(bytes.NewReader(npyFile(1, good, data[:3]))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated data: %v is not io.ErrUnexpectedEOF", err)
	}
	// A huge shape over a short stream fails without allocating it all:
	// 16 GB, or a quarter of the machine's memory where that is less (the
	// host check refuses more than all of it).
	rows := uint64(1_000_000_000)
	if m := hostMemory(); m > 0 {
		rows = min(rows, m/64)
	}
	big := header(fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 4), }", rows))
	if _, err := ReadNPY(bytes.NewReader(big)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("truncated data: 8 of %d bytes", rows*16)) {
		t.Errorf("huge shape, short stream: %v", err)
	}
}

// TestReadNPYEmptyHugeShape reads an empty array whose contiguous strides
// overflow int: it has no elements, so it is valid.
func TestReadNPYEmptyHugeShape(t *testing.T) {
	in := npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }\n", nil)
	x, err := ReadNPY(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Shape(), []int{0, 1 << 40, 1 << 40}) || x.Numel() != 0 || x.SpanBytes() != 0 {
		t.Fatalf("got %v%v strides %v", x.DType(), x.Shape(), x.Strides())
	}
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	if y, err := ReadNPY(&buf); err != nil || !slices.Equal(y.Shape(), x.Shape()) {
		t.Fatalf("round trip: %v, %v", y, err)
	}
}

func TestReadNPYSequential(t *testing.T) {
	a, b := New(I32, 3), New(BF16, 2, 2)
	a.SetInt64s([]int64{1, 2, 3})
	b.SetFloat64s([]float64{0.5, -1, 2, 1e10})
	var buf bytes.Buffer
	for _, x := range []*Tensor{a, b} {
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []*Tensor{a, b} {
		got, err := ReadNPY(&buf)
		if err != nil || got.DType() != want.DType() || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("sequential read: %v, %v", got, err)
		}
	}
}

func TestSaveLoadNPY(t *testing.T) {
	dir := t.TempDir()
	x, _ := NewStrided(F16, []int{3, 5}, []int{8, 1})
	x.FillUniform(SeededRNG(4), -2, 2)
	path := filepath.Join(dir, "x.npy")
	if err := SaveNPY(path, x); err != nil {
		t.Fatal(err)
	}
	y, err := LoadNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	if y.DType() != F16 || !slices.Equal(y.Shape(), []int{3, 5}) || !slices.Equal(y.Float64s(), x.Float64s()) {
		t.Errorf("LoadNPY: %v%v %v", y.DType(), y.Shape(), y.Float64s())
	}
	// A file cut short, with a shape far larger than the file, fails on its size.
	b, _ := os.ReadFile(path)
	cut := filepath.Join(dir, "cut.npy")
	os.WriteFile(cut, b[:len(b)-1], 0o644)
	if _, err := LoadNPY(cut); err == nil || !strings.Contains(err.Error(), "cut.npy: tensor: ReadNPY: truncated") {
		t.Errorf("LoadNPY of a cut file: %v", err)
	}
	if _, err := LoadNPY(filepath.Join(dir, "missing.npy")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadNPY of a missing file: %v", err)
	}
	if err := SaveNPY(filepath.Join(dir, "no", "such", "dir.npy"), x); err == nil {
		t.Error("SaveNPY into a missing directory: no error")
	}
	if err := SaveNPY(filepath.Join(dir, "nil.npy"), nil); err == nil {
		t.Error("SaveNPY of nil: no error")
	} else if _, serr := os.Stat(filepath.Join(dir, "nil.npy")); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("failed SaveNPY left a file: %v", serr)
	}
}

// TestLoadNPYFromPipe loads from a named pipe, whose size (0) says nothing
// about how much it holds.
func TestLoadNPYFromPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe.npy")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	x := New(I32, 2, 3)
	x.SetInt64s([]int64{1, -2, 3, -4, 5, -6})
	written := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // waits for the reader
		if err != nil {
			written <- err
			return
		}
		err = WriteNPY(f, x)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		written <- err
	}()
	y, err := LoadNPY(path)
	werr := <-written
	if err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if !slices.Equal(y.Shape(), x.Shape()) || !slices.Equal(y.Int64s(), x.Int64s()) {
		t.Fatalf("LoadNPY from a pipe: %v %v", y.Shape(), y.Int64s())
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteNPYErrors(t *testing.T) {
	if err := WriteNPY(failWriter{}, New(F32, 4)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing writer: %v", err)
	}
	bad := &Tensor{dtype: Invalid}
	if err := WriteNPY(io.Discard, bad); err == nil || !strings.Contains(err.Error(), "dtype invalid") {
		t.Errorf("invalid dtype: %v", err)
	}
}
