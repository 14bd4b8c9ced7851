package workerapp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capflow/capflow/internal/buildinfo"
	"github.com/hashicorp/go-hclog"
)

// A build is named for the SDK by its version where that tells it from
// other builds (go test binaries carry no VCS stamp: the version decides),
// else by the content ID the linker wrote in it, never left for the SDK
// to hash the binary.
func TestBuildName(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	id := buildinfo.ContentID()
	if id == "" {
		t.Fatal("the test binary has no content ID")
	}
	for v, want := range map[string]string{"dev": "dev+" + id, "5cd8cba-dirty": "5cd8cba-dirty+" + id, "5cd8cba": "5cd8cba", "v1.2.0": "v1.2.0"} {
		Version = v
		if got := buildName(); got != want {
			t.Errorf("version %q: build name %q, want %q", v, got, want)
		}
	}
}

// A worker started without --project in a folder of a project works in
// that project, as the CLI started there does.
func TestWorkerFindsItsProjectAsTheCLIDoes(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "plans")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "capflow.yaml"), []byte("temporal: {task_queue: found-above}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	cfg, ok := configure(flags{}, hclog.NewNullLogger())
	if !ok || cfg.Root != root || cfg.Temporal.TaskQueue != "found-above" {
		t.Fatalf("ok %v, root %s, queue %s; want %s found-above", ok, cfg.Root, cfg.Temporal.TaskQueue, root)
	}
}
