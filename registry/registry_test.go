package registry

import (
	"errors"
	"sync"
	"testing"

	"github.com/gokittens/kittens/cuda"
)

func TestRegisterLookupFamily(t *testing.T) {
	Register(&Op{Name: "zz_test_b", Family: "zz_fam"})
	Register(&Op{Name: "zz_test_a", Family: "zz_fam"})
	ops := Family("zz_fam")
	if len(ops) != 2 || ops[0].Name != "zz_test_a" {
		t.Fatalf("family not sorted by name: %v", ops)
	}
	if _, ok := Lookup("zz_test_b"); !ok {
		t.Fatal("lookup failed")
	}
	if _, ok := Lookup("nope"); ok {
		t.Fatal("found an unregistered op")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a duplicate name did not panic")
		}
	}()
	Register(&Op{Name: "zz_test_a", Family: "other"})
}

func TestTorchSnippetsSorted(t *testing.T) {
	RegisterTorch("zz_b", "b")
	RegisterTorch("zz_a", "a")
	s := TorchSnippets()
	ia, ib := -1, -1
	for i, v := range s {
		switch v {
		case "a":
			ia = i
		case "b":
			ib = i
		}
	}
	if ia < 0 || ib < ia {
		t.Fatalf("snippets not sorted by family: %v", s)
	}
}

func TestPrepareRunsEachFamilyOnce(t *testing.T) {
	calls := map[string]int{}
	var mu sync.Mutex
	for _, f := range []string{"zz_p1", "zz_p2"} {
		RegisterPrepare(f, func(*cuda.Device) error {
			mu.Lock()
			calls[f]++
			mu.Unlock()
			if f == "zz_p2" {
				return errors.New("boom")
			}
			return nil
		})
	}
	err := Prepare(nil, []string{"zz_p1", "zz_p2", "zz_p1", "zz_none"})
	if err == nil || calls["zz_p1"] != 1 || calls["zz_p2"] != 1 {
		t.Fatalf("err %v, calls %v", err, calls)
	}
}
