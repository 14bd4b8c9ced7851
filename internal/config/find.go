package config

import (
	"os"
	"path/filepath"
)

// FindProject is the project of a command (or worker) started in dir
// without one named: the nearest folder holding capflow.yaml, from dir up
// (as git finds its repository). found is false when none does: dir
// itself, with the defaults.
func FindProject(dir string) (root string, found bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, FileName)); err == nil && st.Mode().IsRegular() {
			return d, true
		}
		if filepath.Dir(d) == d {
			return dir, false
		}
	}
}
