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
