package cli

import "testing"

func TestMCPNames(t *testing.T) {
	for _, c := range []struct{ in, snake, kebab string }{
		{"get-sum", "get_sum", "get-sum"},
		{"getStructuredContent", "get_structured_content", "get-structured-content"},
		{"read_text_file", "read_text_file", "read-text-file"},
		{"everything-longRunning Op", "everything_long_running_op", "everything-long-running-op"},
		{"--x--", "x", "x"},
	} {
		if got := snake(c.in); got != c.snake {
			t.Errorf("snake(%q) = %q, want %q", c.in, got, c.snake)
		}
		if got := kebab(c.in); got != c.kebab {
			t.Errorf("kebab(%q) = %q, want %q", c.in, got, c.kebab)
		}
	}
	for in, want := range map[string]string{"2.0.0": "2.0.0", "0.2.0-beta": "0.2.0", "v1": "0.0.0", "": "0.0.0"} {
		if got := semverOf(in); got != want {
			t.Errorf("semverOf(%q) = %q, want %q", in, got, want)
		}
	}
}
