package schema

import (
	"fmt"
	"runtime"
	"slices"
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
	got := s.ValidateJSON(map[string]any{"a": list, "p": strings.Repeat("y", 1<<20)}, nil)
	runtime.ReadMemStats(&m1)
	size := 0
	for _, v := range got {
		size += len(v.Message)
	}
	first, last := got[0], got[len(got)-1]
	if len(got) != MaxViolations+1 || strings.Join(first.Path, "/") != "a/0" || first.Message != "must be string, not number" ||
		strings.Join(got[2].Path, "/") != "a/2" || strings.Join(got[99].Path, "/") != "a/99" ||
		last.Message != fmt.Sprintf("and more: %d more errors found after the first %d problems shown", 250000+1-MaxViolations, MaxViolations) || size > 64<<10 {
		t.Fatalf("%d violations, %d bytes of messages: %v ... %v", len(got), size, first, last)
	}
	if one := s.ValidateJSON(map[string]any{"p": strings.Repeat("y", 1<<20)}, nil); len(one) != 1 || len(one[0].Message) > maxViolationMessage ||
		!strings.HasSuffix(one[0].Message, "… [cut]\" does not match ^x$") {
		t.Errorf("a 1 MiB value that does not match: %d violations, %.80v", len(one), one)
	}
	// What the library allocates for each wrong item (~420 bytes) is the
	// rest; the reports' own share was three times that.
	if m1.TotalAlloc-m0.TotalAlloc > 200<<20 {
		t.Errorf("%d MB allocated", (m1.TotalAlloc-m0.TotalAlloc)>>20)
	}
}

// An object's many unknown fields are one error of the library: they are
// bounded as many errors are (50,000 made as many violations).
func TestManyUnknownFieldsAreBounded(t *testing.T) {
	s, _ := Compile(map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"name": map[string]any{"type": "string"}}})
	v := map[string]any{}
	for i := range 50000 {
		v[fmt.Sprintf("k%05d", i)] = 1
	}
	got := s.ValidateJSON(v, nil)
	if len(got) != MaxViolations+1 || got[len(got)-1].Message != fmt.Sprintf("and more: %d more errors found after the first %d problems shown", 50000-MaxViolations, MaxViolations) || got[0].Path[0] != "k00000" || got[99].Path[0] != "k00099" {
		t.Fatalf("%d violations, the last %v", len(got), got[len(got)-1])
	}
}

// A value a message quotes is masked before it is cut: a secret the cut
// split in two would no longer be found whole, and its start would show.
func TestMaskedBeforeCut(t *testing.T) {
	secret := "ghp_S3cr3tT0kenValue0123456789abcdefghij"
	s, _ := Compile(map[string]any{"type": "object", "properties": map[string]any{"u": map[string]any{"type": "string", "pattern": "^https://"}}})
	mask := func(v string) string { return strings.ReplaceAll(v, secret, "[REDACTED]") }
	got := s.ValidateJSON(map[string]any{"u": "http://example.com/" + strings.Repeat("p", 140) + "?token=" + secret}, mask)
	if len(got) != 1 || strings.Contains(got[0].Message, secret[:8]) || !strings.Contains(got[0].Message, "[REDACTED]") {
		t.Fatalf("%v", got)
	}
}

// Places are in one order whatever the keys: digit keys by value first,
// then the rest by text (2 < 10 < 1a, with no cycle).
func TestComparePlaces(t *testing.T) {
	keys := []string{"b", "10", "1a", "2", "007", "a", "99999999999999999999999", "0"}
	slices.SortFunc(keys, compareKeys)
	if want := []string{"0", "2", "007", "10", "99999999999999999999999", "1a", "a", "b"}; !slices.Equal(keys, want) {
		t.Fatalf("%q, want %q", keys, want)
	}
	for _, a := range keys {
		for _, b := range keys {
			if compareKeys(a, b) != -compareKeys(b, a) {
				t.Errorf("%q and %q are not ordered one way", a, b)
			}
		}
	}
}

// A person's file (a plan, a manifest) is told every problem: its own
// report lists and counts them (plan check's 20,000 problems).
func TestAPersonsFileIsToldEveryProblem(t *testing.T) {
	s, _ := Compile(map[string]any{"type": "array", "items": map[string]any{"type": "string"}})
	list := make([]any, 250)
	for i := range list {
		list[i] = float64(1)
	}
	got := s.Validate(list)
	if len(got) != 250 || !strings.Contains(got[0].Message, "in YAML") || got[249].Path[0] != "249" {
		t.Fatalf("%d violations, the first %v", len(got), got[0])
	}
}
