package registry

import (
	"testing"

	"github.com/capflow/capflow/internal/manifest"
)

// A pin or a name may carry its origin (a kit's id, or project): the same
// name@version in two kits is addressed by its uid.
func TestPinnedByUID(t *testing.T) {
	core := &manifest.Manifest{Name: "t", Version: "1.2.0", Kit: "core"}
	media := &manifest.Manifest{Name: "t", Version: "1.2.0", Kit: "media"}
	proj := &manifest.Manifest{Name: "t", Version: "2.0.0"}
	for _, c := range []struct {
		pin  string
		m    *manifest.Manifest
		want bool
	}{
		{"t", core, true}, {"t@1", media, true}, {"core/t", core, true}, {"core/t", media, false},
		{"media/t@1.2", media, true}, {"project/t", proj, true}, {"project/t", core, false}, {"core/t@2", core, false}, {"", media, true},
	} {
		if got := Pinned(c.m, c.pin); got != c.want {
			t.Errorf("%q on %s: %v", c.pin, c.m.UID(), got)
		}
	}
	if core.UID() != "core/t@1.2.0" || proj.UID() != "project/t@2.0.0" {
		t.Fatal(core.UID(), proj.UID())
	}
}
