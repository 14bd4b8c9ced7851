package beneath

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

func TestRelAndPick(t *testing.T) {
	for _, c := range []struct {
		base, p, rel string
		ok           bool
	}{
		{"/p", "/p/a/b", "a/b", true},
		{"/p", "a/b", "a/b", true},
		{"/p", "/p", ".", true},
		{"/p", "/p/../q", "", false},
		{"/p", "../q", "", false},
		{"/p", "/pq/x", "", false},
		{"/p", "/etc/passwd", "", false},
		{"/p", "a\x00b", "", false},
		{"/p", "", "", false},
	} {
		rel, ok := Rel(c.base, c.p)
		if rel != c.rel || ok != c.ok {
			t.Errorf("Rel(%q, %q) = %q %v, want %q %v", c.base, c.p, rel, ok, c.rel, c.ok)
		}
	}
	base, rel, ok := Pick([]string{"/p/run/step", "/p/out", "/p"}, "/p/run/step/x")
	if base != "/p/run/step" || rel != "x" || !ok {
		t.Fatalf("Pick chose %q %q %v", base, rel, ok)
	}
	if _, _, ok := Pick([]string{"/p/run/step"}, "relative/x"); ok {
		t.Fatal("Pick took a relative path")
	}
	if _, _, ok := Pick([]string{"/p/run/step", "/p/out"}, "/root/.ssh/id_rsa"); ok {
		t.Fatal("Pick took a path outside every base")
	}
}

func TestReadFileStaysBeneath(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	must(t, os.WriteFile(secret, []byte("key"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("fine"), 0o644))
	must(t, os.Symlink(secret, filepath.Join(dir, "link.yaml")))
	must(t, os.Symlink("ok.yaml", filepath.Join(dir, "inner.yaml")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "big.yaml"), bytes.Repeat([]byte("x"), 100), 0o644))
	if b, err := ReadFile(dir, "ok.yaml", 10, "plan"); err != nil || string(b) != "fine" {
		t.Fatalf("ok.yaml: %q %v", b, err)
	}
	if b, err := ReadFile(dir, "inner.yaml", 10, "plan"); err != nil || string(b) != "fine" {
		t.Fatalf("a link inside the folder: %q %v", b, err)
	}
	for _, name := range []string{"link.yaml", "fifo.yaml", "big.yaml", "../x", secret, "missing.yaml", filepath.Join(dir, "..", filepath.Base(outside), "secret")} {
		b, err := ReadFile(dir, name, 10, "plan")
		if caperr.CodeOf(err) != caperr.InvalidInput || b != nil {
			t.Errorf("%s: %q %v, want INVALID_INPUT", name, b, err)
		}
	}
}

func TestCreateIsWholeAndBeneath(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(dir, "sub")))
	r, err := os.OpenRoot(dir)
	must(t, err)
	defer r.Close()
	write := func(w io.Writer) error { _, err := w.Write([]byte("data")); return err }
	must(t, Create(r, "a/b/c.txt", 0o644, write))
	if b, _ := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); string(b) != "data" {
		t.Fatalf("created %q", b)
	}
	if err := Create(r, "sub/authorized_keys", 0o644, write); !Escapes(err) {
		t.Fatalf("through a link out: %v", err)
	}
	if err := Create(r, "d.txt", 0o644, func(io.Writer) error { return io.ErrUnexpectedEOF }); err == nil {
		t.Fatal("a failed write gave no error")
	}
	for _, d := range []string{outside, dir} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() != "a" && e.Name() != "sub" {
				t.Errorf("%s holds %s", d, e.Name())
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
