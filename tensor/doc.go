// Package tensor is the library's n-dimensional array: a dtype, a shape and
// strides in elements, stored on the host or on a CUDA device.
//
// # Layout
//
// The last dimension is always contiguous (stride 1); a row stride may
// exceed the row, leaving a gap, so a column slice of a wider matrix is a
// valid tensor. The dimensions nest in row-major order and never overlap
// (see Tensor). View reinterprets a tensor's storage with another dtype,
// shape or strides; Slice narrows one dimension. Both share storage with
// the tensor they came from.
//
// # Host and device
//
// Host tensors are what the CPU references read and write, through float64:
// Float64s returns the elements in row-major order and SetFloat64s stores
// them, rounding each value once, to nearest with ties to even, into the
// tensor's dtype (Round says what a value becomes). Int64s and SetInt64s
// move integers exactly. Device tensors are what kernels read and write;
// ToDevice, ToHost and CopyFrom move storage between the two, gaps
// included. Poison fills storage with 0xFF bytes (NaN in every float dtype)
// so that a test can tell which outputs a kernel never wrote.
//
// # Conversions
//
// BF16Bits, F16Bits, F8E4M3Bits and F8E5M2Bits round a float64 to a
// narrow float's bit pattern in one step (no double rounding through
// float32); BF16Value, F16Value and F8Value read a pattern back. Overflow
// gives ±Inf in bf16 and f16, and saturates to the largest finite value in
// both fp8 formats, matching the device's cvt.rn and cvt.rn.satfinite
// conversions.
//
// # Validation
//
// Validate collects the checks an op makes on its arguments before it runs:
// rank, dtype, shape, layout, location, overlap, int32 indexing. The first
// failure is reported as an *ArgError naming the op and the argument.
//
// # Files
//
// WriteNPY, ReadNPY, SaveNPY and LoadNPY move tensors to and from NumPy's
// .npy format. bfloat16 and fp8 travel as unsigned integers of the same
// width; see WriteNPY for how PyTorch reinterprets them.
package tensor
