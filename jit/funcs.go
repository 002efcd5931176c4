package jit

import (
	"sync"

	"github.com/gokittens/kittens/cuda"
)

// Funcs memoizes built kernels by a small comparable specialization (a
// struct of dtype, vector width, block size...). Ops keep one Funcs per
// kernel family: a lookup after the first build takes a read lock and a map
// probe and allocates nothing, which keeps the launch path cheap.
type Funcs[K comparable] struct {
	// Kernel describes the kernel for a specialization.
	Kernel func(K) Kernel

	mu sync.RWMutex
	m  map[funcsKey[K]]*cuda.Function
}

type funcsKey[K comparable] struct {
	dev       *cuda.Device
	k         K
	dependent bool
}

// Get returns the kernel for spec built on dev for launches on s (nil: the
// legacy default stream): built for dependent launches (Kernel.Dependent)
// where s is set for them (cuda.Stream.DependentLaunch), plainly otherwise.
func (f *Funcs[K]) Get(dev *cuda.Device, s *cuda.Stream, spec K) (*cuda.Function, error) {
	key := funcsKey[K]{dev, spec, s.DependentLaunch()}
	f.mu.RLock()
	fn := f.m[key]
	f.mu.RUnlock()
	if fn != nil {
		return fn, nil
	}
	k := f.Kernel(spec)
	k.Dependent = key.dependent
	fn, err := Get(dev, k)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.m == nil {
		f.m = map[funcsKey[K]]*cuda.Function{}
	}
	f.m[key] = fn
	f.mu.Unlock()
	return fn, nil
}
