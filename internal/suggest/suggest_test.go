package suggest

import (
	"reflect"
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
