package schema

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// One validation reports its first MaxViolations problems, by place, each
// message bounded, then how many more: a tool's list of 250,000 wrong items
// made a violation each (a 125 MB message from 2 MiB of data, found
// attacking issue 57).
func TestViolationsAreBounded(t *testing.T) {
	s, vs := Compile(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"p": map[string]any{"type": "string", "pattern": "^x$"},
	}})
	if len(vs) > 0 {
		t.Fatal(vs)
	}
	list := make([]any, 250000)
	for i := range list {
		list[i] = float64(0)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	got := s.Validate(map[string]any{"a": list, "p": strings.Repeat("y", 1<<20)})
	runtime.ReadMemStats(&m1)
	size := 0
	for _, v := range got {
		size += len(v.Message)
	}
	first, last := got[0], got[len(got)-1]
	if len(got) != MaxViolations+1 || strings.Join(first.Path, "/") != "a/0" || !strings.HasPrefix(first.Message, "must be string, not number") ||
		last.Message != fmt.Sprintf("and up to %d more problems (the first %d are shown)", 250000+1-MaxViolations, MaxViolations) || size > 64<<10 {
		t.Fatalf("%d violations, %d bytes of messages: %v ... %v", len(got), size, first, last)
	}
	if one := s.Validate(map[string]any{"p": strings.Repeat("y", 1<<20)}); len(one) != 1 || len(one[0].Message) > maxViolationMessage ||
		!strings.HasSuffix(one[0].Message, "… [cut]\" does not match ^x$") {
		t.Errorf("a 1 MiB value that does not match: %d violations, %.80v", len(one), one)
	}
	// What the library allocates for each wrong item (~420 bytes) is the
	// rest; the reports' own share was three times that.
	if m1.TotalAlloc-m0.TotalAlloc > 200<<20 {
		t.Errorf("%d MB allocated", (m1.TotalAlloc-m0.TotalAlloc)>>20)
	}
}
