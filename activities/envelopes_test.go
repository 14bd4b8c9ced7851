package activities

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
)

// Envelope files are written in the order they were asked for: the last
// attempt's file wins, whether its write waited or not.
func TestEnvelopeWritesInOrder(t *testing.T) {
	var w envelopeWriter
	dir := filepath.Join(t.TempDir(), "steps", "s")
	for i := 1; i <= 200; i++ {
		p := w.store(dir, envelope.Envelope{ToolID: "t", Message: fmt.Sprint(i)}, i%50 == 0)
		if p != envelopePath(dir) {
			t.Fatalf("path %q", p)
		}
	}
	w.flush()
	raw, err := os.ReadFile(envelopePath(dir))
	var env envelope.Envelope
	if err != nil || json.Unmarshal(raw, &env) != nil || env.Message != "200" {
		t.Fatalf("%s %v: want the 200th write", raw, err)
	}
	// A write that waits finds its file there.
	if p := w.store(filepath.Join(t.TempDir(), "new"), envelope.Envelope{ToolID: "t"}, true); p == "" {
		t.Fatal("a waited write reported no file")
	} else if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}
