package caperr

import (
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"
)

func TestErrorRendering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"full", New(InvalidInput, "bad name").At("a/tool.yaml", 3, 7, "name"), "a/tool.yaml:3:7: name: bad name"},
		{"no position", New(ConfigError, "missing"), "missing"},
		{"file only", New(ConfigError, "broken").At("x.yaml", 0, 0, ""), "x.yaml: broken"},
		{"wrapped", Wrap(ToolFailure, errors.New("exit 3"), "tool died"), "tool died: exit 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCodeOf(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("context: %w", New(PolicyBlocked, "no"))
	if got := CodeOf(wrapped); got != PolicyBlocked {
		t.Fatalf("CodeOf(wrapped) = %s", got)
	}
	if got := CodeOf(errors.New("plain")); got != InternalError {
		t.Fatalf("CodeOf(plain) = %s", got)
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	// The contract's 18, and RESOURCE_EXHAUSTED (its section 16).
	if len(All()) != 19 {
		t.Fatalf("contract lists 19 codes, table has %d", len(All()))
	}
	if r := Lookup(ResourceExhausted); r.Severity != High || r.Retryable || r.ExitCode != 1 {
		t.Fatalf("RESOURCE_EXHAUSTED: %+v", r)
	}
	if Lookup(PolicyBlocked).ExitCode != 4 || Lookup(Cancelled).ExitCode != 5 || Lookup(InvalidInput).ExitCode != 2 {
		t.Fatal("exit codes do not follow docs/cli.md")
	}
	if Lookup("NOPE").Retryable {
		t.Fatal("unknown codes must not be retryable")
	}
	if Lookup(ToolFailure).Retryable != true || Lookup(SchemaViolation).Retryable {
		t.Fatal("retryable flags wrong")
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[string]string{"1 step": Count(1, "step"), "2 steps": Count(2, "step"), "0 kits": Count(0, "kit"), "3 capabilities": Count(3, "capability"), "2 keys": Count(2, "key")} {
		if n != want {
			t.Errorf("%q, want %q", want, n)
		}
	}
}

// A one-line view cuts on a character's boundary (an MCP server's long
// non-ASCII answer cut through one made a cache entry whose JSON did not
// read back byte for byte).
func TestHeadlineCutsOnACharacter(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"ответ", 3, "о…"}, {"ответ", 4, "от…"}, {"abc\ndef", 10, "abc"}, {"abcdef", 3, "abc…"}, {"短い", 10, "短い"}, {"短い", 2, "…"},
	} {
		got := Headline(c.in, c.max)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Headline(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
