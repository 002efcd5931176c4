package conv1d

import (
	"math"
	"testing"

	"github.com/gokittens/kittens/cuda"
)

// gridFits says whether g is a valid launch with at least slots slots and
// fewer than one row of y surplus.
func gridFits(g cuda.Dim3, slots int) bool {
	y, z := int(g.Y), int(g.Z)
	return g.X >= 1 && g.X <= math.MaxInt32 && y >= 1 && y <= maxGridY && z >= 1 && z <= maxGridY &&
		y*z >= slots && y*(z-1) < slots
}

func TestGridOf(t *testing.T) {
	for _, slots := range []int{1, 2, 171, maxGridY - 1, maxGridY, maxGridY + 1, 2*maxGridY + 7, 1 << 28} {
		if g := gridOf(slots, 16); !gridFits(g, slots) || g.X != 16 {
			t.Errorf("gridOf(%d, 16) = %+v", slots, g)
		}
	}
}
