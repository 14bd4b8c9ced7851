package toolrun

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capflow/capflow/internal/envelope"
)

// What a tool hands back is masked before it is cut: a cut through a
// secret left its start (an MCP answer's first line) or its end (an HTTP
// answer's or a command's stdout's last bytes), which no mask then matched
// (left by the attacks of issue 57).
func TestMaskedBeforeItIsCut(t *testing.T) {
	secret := "ghp_S3cr3tT0kenValue0123"
	red := envelope.NewRedactor(secret)
	for _, at := range []int{190, 195, 199} { // the secret across the 200-byte cut
		text := strings.Repeat("a", at) + secret + " more\nsecond line"
		got := answerLine("tool", text, red)
		if strings.ContainsAny(got, "gh") { // the secret's start; "tool: " and the a's hold neither
			t.Errorf("cut at %d: %q keeps part of the secret", at, got)
		}
	}
	for _, at := range []int{2, 10, 20} { // the secret across the tail's start
		raw := []byte("head " + secret[:len(secret)-at] + secret[len(secret)-at:] + strings.Repeat("b", 2048-at))
		got := red.CutFront(lastBytes(raw, 2048))
		if strings.Contains(got, secret[len(secret)-at:]) && at >= 4 {
			t.Errorf("tail after %d bytes of the secret: %q keeps its end", at, got[:40])
		}
		if len(got) > 2048+len(envelope.Mask) {
			t.Errorf("tail of %d bytes", len(got))
		}
	}
	// stdout past its cap ends at a cut: the start of a secret there is
	// masked, in the data and in stdout.log (found reviewing the fix).
	c := &capped{max: 64 << 10}
	c.Write([]byte(strings.Repeat("a", 65529) + secret))
	if got := string(c.masked(red)); strings.Contains(got, secret[:7]) || !strings.HasSuffix(got, envelope.Mask) {
		t.Errorf("capped stdout ends %q", got[len(got)-20:])
	}
	// Masked once, and again after a write: what came after is masked too.
	short := &capped{max: 1 << 10}
	short.Write([]byte("a "))
	short.masked(red)
	short.Write([]byte(secret))
	if got := string(short.masked(red)); got != "a "+envelope.Mask {
		t.Errorf("masked after a later write: %q", got)
	}
	if got := lastBytes([]byte(strings.Repeat("\x80", 100)), 10); len(got) != 7 {
		t.Errorf("binary tail of %d bytes, want 7 (at most 3 skipped)", len(got))
	}
	// A tail starts on a character: "é" is two bytes, and 2047 of them cut one.
	if got := lastBytes([]byte(strings.Repeat("é", 2000)), 2047); !utf8.ValidString(got) || len(got) != 2046 {
		t.Errorf("tail of %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
