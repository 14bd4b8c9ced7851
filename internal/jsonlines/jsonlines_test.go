package jsonlines

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	in := "{\"a\":1}\n\nnot json\n{\"cut\":[\n" + strings.Repeat("x", 100) + "\n[1,2]"
	var bad []string
	r := New(strings.NewReader(in), 50, func(why string) error { bad = append(bad, why); return nil })
	out, err := io.ReadAll(r)
	if err != nil || string(out) != "{\"a\":1}\n\n[1,2]" {
		t.Fatalf("%q %v", out, err)
	}
	if len(bad) != 3 || !strings.Contains(bad[2], "more than 50 bytes") {
		t.Fatalf("bad lines: %q", bad)
	}
	stop := errors.New("stop")
	r = New(strings.NewReader("{}\n{\"cut\n{}\n"), 50, func(string) error { return stop })
	out, err = io.ReadAll(r)
	if !errors.Is(err, stop) || string(out) != "{}\n" {
		t.Fatalf("%q %v", out, err)
	}
}
