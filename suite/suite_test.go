package suite

import (
	"slices"
	"testing"
)

func TestFamilies(t *testing.T) {
	fs := Families{
		{Name: "a", Ops: []*Op{{Name: "a1", Family: "a"}, {Name: "a2", Family: "a"}}, Torch: "# a"},
		{Name: "b", Ops: []*Op{{Name: "b1", Family: "b"}}, Torch: "# b"},
	}
	var names []string
	for _, op := range fs.Ops() {
		names = append(names, op.Name)
	}
	if !slices.Equal(names, []string{"a1", "a2", "b1"}) {
		t.Errorf("Ops: %v", names)
	}
	if op, ok := fs.Lookup("b1"); !ok || op.Family != "b" {
		t.Errorf("Lookup(b1) = %v, %v", op, ok)
	}
	if _, ok := fs.Lookup("c"); ok {
		t.Error("Lookup found an op that is not there")
	}
	if got := fs.Torch(); !slices.Equal(got, []string{"# a", "# b"}) {
		t.Errorf("Torch: %v", got)
	}
}
