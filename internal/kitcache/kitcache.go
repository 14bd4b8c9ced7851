// Package kitcache puts a kit that ships inside the binaries on disk when
// its tools run files (media's scripts and the modules beside them), so
// `active_kits: [media]` works in a project anywhere: the kit is written
// once per build beneath the user's cache, read-only, and compared with
// the copy in the binary each time it is used, so a cached file that was
// edited, added or replaced by a link is never run.
package kitcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Root is where kits are written: the user's cache folder (XDG_CACHE_HOME,
// else ~/.cache), capflow/kits.
func Root() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder for the built-in kits: %w", err)
	}
	return filepath.Join(dir, "capflow", "kits"), nil
}

// NeedsDisk reports whether kit id of fsys holds files its tools run
// (anything but kit.yaml, tool.yaml and description.md).
func NeedsDisk(fsys fs.FS, id string) bool {
	needs := false
	_ = fs.WalkDir(fsys, id, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch path.Base(p) {
		case "kit.yaml", "tool.yaml", "description.md":
			return nil
		}
		needs = true
		return fs.SkipAll // names only: the files are read once, by Materialize
	})
	return needs
}

// file is one file of an embedded kit, its name relative to the kit.
type file struct {
	name string
	data []byte
}

// Materialize returns the folder holding kit id of fsys beneath root,
// writing it there first when it is absent or differs from fsys.
func Materialize(fsys fs.FS, id, root string) (string, error) {
	files, err := list(fsys, id)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, digest(files), id)
	if same(dir, files) {
		return dir, nil
	}
	if err := write(filepath.Dir(dir), id, files); err != nil {
		return "", fmt.Errorf("cannot write built-in kit %s beneath %s: %w", id, root, err)
	}
	if !same(dir, files) {
		return "", fmt.Errorf("built-in kit %s in %s differs from the one in capflow after it was written", id, dir)
	}
	return dir, nil
}

// list reads kit id's files from fsys, sorted by name.
func list(fsys fs.FS, id string) ([]file, error) {
	var out []file
	err := fs.WalkDir(fsys, id, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		out = append(out, file{name: strings.TrimPrefix(p, id+"/"), data: data})
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, err
}

func digest(files []file) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.name, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// same reports whether dir holds exactly files: the same names, regular
// files with the same bytes, nothing else and no link (read beneath dir).
func same(dir string, files []file) bool {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	want := map[string][]byte{}
	for _, f := range files {
		want[f.name] = f.data
	}
	seen := 0
	err = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return errors.New("not a regular file")
		}
		data, ok := want[p]
		if !ok {
			return errors.New("not in the kit")
		}
		got, err := r.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			return errors.New("altered")
		}
		seen++
		return nil
	})
	return err == nil && seen == len(files)
}

// write puts files in parent/id: written to a fresh folder beside it,
// made read-only, then renamed into place (a folder that differed is
// moved aside and removed first).
func write(parent, id string, files []file) error {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+id+"-")
	if err != nil {
		return err
	}
	defer removeAll(tmp)
	r, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer r.Close()
	var dirs []string
	for _, f := range files {
		if d := path.Dir(f.name); d != "." {
			if err := r.MkdirAll(d, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, d)
		}
		mode := os.FileMode(0o444)
		if bytes.HasPrefix(f.data, []byte("#!")) {
			mode = 0o555
		}
		if err := r.WriteFile(f.name, f.data, mode); err != nil {
			return err
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range append(dirs, ".") {
		if err := r.Chmod(d, 0o555); err != nil {
			return err
		}
	}
	dst := filepath.Join(parent, id)
	if _, err := os.Lstat(dst); err == nil {
		old := tmp + ".old"
		if err := os.Rename(dst, old); err != nil {
			return err
		}
		defer removeAll(old)
	}
	if err := os.Rename(tmp, dst); err != nil && !same(dst, files) {
		return err // another process's rename won only if it wrote the same
	}
	return nil
}

// removeAll removes a read-only tree this package wrote.
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
