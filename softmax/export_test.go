package softmax

import (
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Hooks for configs_test.go (package softmax_test), which runs hand-picked
// launches on softmaxtest's inputs and tolerances; internal tests cannot
// import softmaxtest.
type Config = config

var (
	PickRegister    = pickRegister
	PickConfig      = pickConfig
	BulkConfig      = bulkConfig
	CheckInvariants = checkInvariants
	SmallGPU        = small // a pre-Hopper GPU: no clusters, no bulk copies
)

// Launch runs config c as Softmax runs the config it picks.
func Launch(s *cuda.Stream, y, x *tensor.Tensor, scale float32, c Config) error {
	return run(s, y, x, scale, c)
}
