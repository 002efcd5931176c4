package gputest

import (
	"regexp"
	"slices"
	"testing"
)

// TestPatternSelects holds the parallel warm-up of RunChecks to the cases
// go test runs: a -test.run pattern matched level by level, slashes inside
// brackets and parentheses kept, spaces in names as underscores.
func TestPatternSelects(t *testing.T) {
	if got := splitLevels(`TestParity/(a/b|c)/[/x]y\/z/`); !slices.Equal(got, []string{"TestParity", "(a/b|c)", `[/x]y\/z`, ""}) {
		t.Errorf("splitLevels: %q", got)
	}
	compile := func(s string) pattern {
		var p pattern
		for _, l := range splitLevels(s) {
			p = append(p, regexp.MustCompile(l))
		}
		return p
	}
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"", "TestParity/rmsnorm/33x1000 bf16", true},
		{"TestParity", "TestParity/rmsnorm/33x1000 bf16", true},
		{"TestParity/rmsnorm/", "TestParity/rmsnorm/33x1000 bf16", true},
		{"TestParity/rmsnorm$/", "TestParity/rmsnorm_pad/1x2880 bf16", false},
		{"TestParity/layernorm", "TestParity/rmsnorm/33x1000 bf16", false},
		{"TestParity/rmsnorm/33x1000_bf16$", "TestParity/rmsnorm/33x1000 bf16", true},
		{"TestParity/rmsnorm/f32", "TestParity/rmsnorm/33x1000 bf16", false},
		{"TestOther", "TestParity/rmsnorm/33x1000 bf16", false},
	} {
		var p pattern
		if tc.pattern != "" {
			p = compile(tc.pattern)
		}
		if got := p.selects(tc.name); got != tc.want {
			t.Errorf("-test.run %q selects %q: %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
