package builtin

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Links, FIFOs and devices are never followed, written or packed, and
// never dropped without a word: each is listed under skipped with why.
func TestSkippedEntriesAreReported(t *testing.T) {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "b.txt")))
	must(t, syscall.Mkfifo(filepath.Join(root, "c.txt"), 0o600))

	got, err := call(t, "file.list", root, map[string]any{"dir": ".", "pattern": "*.txt"})
	if err != nil || got["count"] != 1 || got["skipped_count"] != 2 {
		t.Fatalf("file.list: %v %v", got, err)
	}
	kinds := ""
	for _, s := range got["skipped"].([]any) {
		kinds += s.(map[string]any)["type"].(string) + " "
	}
	if kinds != "symlink fifo " {
		t.Fatalf("file.list skipped %q", kinds)
	}
	got, err = call(t, "archive.create", root, map[string]any{"source": ".", "output": "out.tar.gz"})
	if err != nil || got["count"] != 1 || got["skipped_count"] != 2 {
		t.Fatalf("archive.create: %v %v", got, err)
	}

	// A tar.gz with a file, a symlink and a hard link.
	f, err := os.Create(filepath.Join(root, "links.tar.gz"))
	must(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	must(t, tw.WriteHeader(&tar.Header{Name: "ok.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}))
	_, _ = tw.Write([]byte("ok"))
	must(t, tw.WriteHeader(&tar.Header{Name: "evil", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}))
	must(t, tw.WriteHeader(&tar.Header{Name: "hard", Linkname: "ok.txt", Typeflag: tar.TypeLink}))
	must(t, tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	must(t, tw.Close())
	must(t, gz.Close())
	must(t, f.Close())
	got, err = call(t, "archive.extract", root, map[string]any{"archive": "links.tar.gz", "dest": "x"})
	if err != nil || got["count"] != 1 || got["skipped_count"] != 3 {
		t.Fatalf("archive.extract: %v %v", got, err)
	}
	first := got["skipped"].([]any)[0].(map[string]any)
	if first["path"] != "evil" || !strings.Contains(first["reason"].(string), `"/etc/passwd"`) {
		t.Fatalf("skipped %v", first)
	}
	if _, err := os.Lstat(filepath.Join(root, "x", "evil")); !os.IsNotExist(err) {
		t.Fatal("a link was extracted")
	}
}
