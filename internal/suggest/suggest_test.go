package suggest

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	fields := []string{"name", "version", "description", "capabilities", "entrypoint", "input_schema"}
	tests := []struct {
		word string
		want []string
	}{
		{"capabilties", []string{"capabilities"}},
		{"verison", []string{"version"}},
		{"inputschema", []string{"input_schema"}},
		{"zzz", nil},
	}
	for _, tt := range tests {
		if got := Closest(tt.word, fields, 1); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Closest(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
	if Phrase("nmae", fields) != ` (did you mean "name"?)` {
		t.Error(Phrase("nmae", fields))
	}
	if Distance("kitten", "sitting") != 3 {
		t.Error("Distance")
	}
}

// Other workflow tools' words get capflow's, where it is a candidate.
func TestSynonyms(t *testing.T) {
	step := []string{"id", "capability", "with", "needs", "when", "for_each", "retry", "on_failure"}
	for word, want := range map[string]string{
		"depends_on": ` (did you mean "needs"?)`, "dependsOn": ` (did you mean "needs"?)`, "if": ` (did you mean "when"?)`,
		"uses": ` (did you mean "capability"?)`, "retries": ` (did you mean "retry"?)`, "continue-on-error": ` (did you mean "on_failure"?)`,
		"banana": "",
	} {
		if got := Phrase(word, step); got != want {
			t.Errorf("%s: %q, want %q", word, got, want)
		}
	}
	if got := Phrase("depends_on", []string{"name", "steps"}); got != "" {
		t.Errorf("needs is no candidate there: %q", got)
	}
}

// A typo is a near spelling, not a name that holds the word.
func TestTypo(t *testing.T) {
	for _, c := range []struct{ word, want string }{
		{"pth", "path"}, {"cont", "count"}, {"size", ""}, {"zzzyx", ""}, {"count_of_words", ""},
	} {
		if got := Typo(c.word, []string{"path", "count", "size_bytes"}); got != c.want {
			t.Errorf("Typo(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

// Distance agrees with the whole table's answers, transpositions too.
func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ca", "ac", 1}, {"abcd", "badc", 2}, {"héllo", "hello", 1}, {"naem", "name", 1}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// A word or candidates a tool's output chose cost a search what they are,
// not their product: a 1 MiB key weighed against a schema's names took
// 485 MB, and a missing field's name against 200,000 keys 0.9 GB (found
// attacking issue 57). A name within a long one is still suggested.
func TestSuggestingIsBounded(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	keys := make([]string, 200000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%07d", i)
	}
	for _, c := range []struct {
		name, word string
		candidates []string
		want       string
	}{
		{"a 1 MiB word", long, []string{"name", "version"}, ""},
		{"a word within a 1 MiB candidate", "name", []string{long + "name"}, long + "name"},
		{"200,000 candidates", "key0000001x", keys, "key0000001"},
	} {
		var got []string
		allocs := testing.AllocsPerRun(1, func() { got = Closest(c.word, c.candidates, 1) })
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		Closest(c.word, c.candidates, 1)
		runtime.ReadMemStats(&m1)
		if strings.Join(got, "") != c.want || m1.TotalAlloc-m0.TotalAlloc > 8<<20 {
			t.Errorf("%s: %.20q, %.0f allocations, %d bytes", c.name, got, allocs, m1.TotalAlloc-m0.TotalAlloc)
		}
	}
}
