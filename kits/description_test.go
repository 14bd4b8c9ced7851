package kits

import (
	"os"
	"path/filepath"
	"testing"
)

// Every shipped tool says in description.md what it does, needs, returns
// and bounds (docs/manifests.md promises it; tools validate warns
// project tools that lack one).
func TestEveryShippedToolHasADescription(t *testing.T) {
	manifests, _ := filepath.Glob("*/*/tool.yaml")
	if len(manifests) < 18 {
		t.Fatalf("found %d shipped tools", len(manifests))
	}
	for _, m := range manifests {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(m), "description.md"))
		if err != nil || len(b) < 200 {
			t.Errorf("%s: no description.md of substance (%v)", filepath.Dir(m), err)
		}
	}
}
