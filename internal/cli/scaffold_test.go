package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScaffoldValidatesAndRuns(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("scaffold: %s", out)
	}
	if st, err := os.Stat(filepath.Join(dir, "tools/pdf-merge/run.sh")); err != nil || st.Mode()&0o100 == 0 {
		t.Fatal("run.sh missing or not executable")
	}
	if code, out, _ = capflow(t, "tools", "validate", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("scaffolded tool does not validate: %s", out)
	}
	code, out, _ = capflow(t, "tools", "run", "pdf-merge", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 0 || env.ToolID != "pdf-merge" || !env.Success {
		t.Fatalf("scaffolded tool does not run: %s", out)
	}
	// A second scaffold refuses to overwrite.
	if code, _, _ = capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir); code != 2 {
		t.Fatalf("overwrite not refused: exit %d", code)
	}
}

// tools scaffold renders the project's templates/tool when it has them:
// the built-in ones written there, edited, make the next tool.
func TestScaffoldUsesTheProjectsTemplates(t *testing.T) {
	dir := t.TempDir()
	if code, out, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("write templates: %s", out)
	}
	tmpl := filepath.Join(dir, "templates/tool/run.sh.tmpl")
	b, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmpl, []byte(strings.Replace(string(b), "scaffold: no logic yet", "our own template", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "templates/tool/NOTES.md.tmpl")
	if err := os.WriteFile(extra, []byte("{{.Name}} provides {{.Capability}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := capflow(t, "tools", "scaffold", "ours", "--capability", "our.thing", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("scaffold: %s", out)
	}
	if notes, _ := os.ReadFile(filepath.Join(dir, "tools/ours/NOTES.md")); string(notes) != "ours provides our.thing\n" {
		t.Fatalf("NOTES.md: %q", notes)
	}
	code, out, _ := capflow(t, "tools", "run", "ours", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || env.Message != "ours finished (our own template)" {
		t.Fatalf("run: %s", out)
	}
	// Written once: a second --write-templates would overwrite edits.
	if code, _, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir); code != 2 {
		t.Fatalf("templates overwritten: exit %d", code)
	}
}

// Shell completion offers tools by name and uid, and (with no server)
// completes no run ID rather than hanging or failing.
func TestCompletion(t *testing.T) {
	root := repoRoot(t)
	_, out, _ := capflow(t, "__complete", "tools", "show", "--project", root, "")
	if !strings.Contains(out, "file-read\tfile.read\n") || !strings.Contains(out, "core/file-read\n") {
		t.Fatalf("tools: %s", out)
	}
	_, out, _ = capflow(t, "__complete", "--address", "127.0.0.1:1", "status", "")
	if !strings.HasSuffix(strings.TrimSpace(out), ":4") {
		t.Fatalf("runs: %s", out)
	}
}

// A template folder's link that leaves it is refused, and nothing of its
// target is written into the new tool.
func TestHostileScaffoldTemplateLink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the worker's key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("write templates: %s", out)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "templates/tool/stolen.txt")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := capflow(t, "tools", "scaffold", "thief", "--capability", "x.y", "--project", dir, "--output", "json")
	b, _ := os.ReadFile(filepath.Join(dir, "tools/thief/stolen.txt"))
	if code != 2 || strings.Contains(string(b), "the worker's key") {
		t.Fatalf("exit %d, stolen.txt %q: %s", code, b, out)
	}
}
