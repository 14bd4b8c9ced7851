package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedKitsWorkAnywhere: a project with nothing but a capflow.yaml,
// far from capflow's repository, uses the kits that ship with capflow:
// core and runtime from the binaries, media's scripts from the copy the
// binaries put in the user's cache (issue 54: media and runtime worked
// only inside the repository). A step of media's storage.list runs on a
// worker there and lists a folder through rclone.
func TestShippedKitsWorkAnywhere(t *testing.T) {
	if _, err := exec.LookPath("rclone"); err != nil {
		t.Fatalf("rclone is not installed (make transfer-tools): %v", err)
	}
	dir, cache := t.TempDir(), t.TempDir()
	write := func(name, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("capflow.yaml", "active_kits: [core, media, runtime]\n")
	write("shelf/a.txt", "one")
	write("shelf/b.txt", "two")
	write("list.yaml", `name: shelf
steps:
  - {id: list, capability: storage.list, with: {remote: shelf}}
  - {id: sum, capability: file.checksum, with: {path: shelf/a.txt}}
`)
	env := []string{"XDG_CACHE_HOME=" + cache, "CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-kits-anywhere",
		"RCLONE_CONFIG_SHELF_TYPE=alias", "RCLONE_CONFIG_SHELF_REMOTE=" + filepath.Join(dir, "shelf")}

	code, e, stderr := h.capflowAt(t, dir, env, "tools", "list")
	var listed struct {
		Tools []struct{ Name, Source string }
	}
	data(t, e, &listed)
	sources := map[string]string{}
	for _, tl := range listed.Tools {
		sources[tl.Name] = tl.Source
	}
	if code != 0 || sources["video-convert"] != "kit:media" || sources["server-start"] != "kit:runtime" || sources["file-read"] != "kit:core" {
		t.Fatalf("tools list: exit %d %v\n%s", code, sources, stderr)
	}
	workerAt(t, dir, env...)
	code, e, stderr = h.capflowAt(t, dir, env, "run", filepath.Join(dir, "list.yaml"))
	var r runResult
	data(t, e, &r)
	if len(r.Steps) == 0 {
		t.Fatalf("run: exit %d %s %s\n%+v\n%s", code, r.Status, e.Message, e.Feedback, stderr)
	}
	list := r.step(t, "list")
	if code != 0 || r.Status != "passed" || list.Envelope == nil || !strings.Contains(list.Envelope.Message, "2 entries") {
		t.Fatalf("run: exit %d %s %s %+v\n%s", code, r.Status, r.Message, list.Envelope, stderr)
	}
	scripts, _ := filepath.Glob(filepath.Join(cache, "capflow", "kits", "*", "media", "storage-list", "run.py"))
	if len(scripts) != 1 {
		t.Fatalf("media was not put in the cache: %v", scripts)
	}
}
