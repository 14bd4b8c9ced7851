package workerapp

import "testing"

// A build is named for the SDK only where the name tells it from other
// builds (go test binaries carry no VCS stamp: the version decides).
func TestBuildName(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	for v, want := range map[string]string{"dev": "", "5cd8cba-dirty": "", "5cd8cba": "5cd8cba", "v1.2.0": "v1.2.0"} {
		Version = v
		if got := buildName(); got != want {
			t.Errorf("version %q: build name %q, want %q", v, got, want)
		}
	}
}
