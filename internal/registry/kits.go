package registry

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/capflow/capflow/internal/yamldoc"
)

// What a project could activate, and where its configuration names a kit:
// for the problem of an active kit that is not there.

// knownKits are the kits a project could activate: the built-in ones and
// the folders of its kits_dirs holding a kit.yaml.
func knownKits(opts Options) []string {
	var out []string
	if opts.Builtin != nil {
		entries, _ := fs.ReadDir(opts.Builtin, ".")
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
	}
	for _, kd := range opts.KitsDirs {
		entries, _ := os.ReadDir(abs(opts.Root, kd))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(abs(opts.Root, kd), e.Name(), "kit.yaml")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// configPos is where the configuration file names kit in active_kits (a
// zero position when it is not there: the environment, a flag).
func configPos(opts Options, display, kit string) yamldoc.Pos {
	data, err := os.ReadFile(abs(opts.Root, display))
	if err != nil {
		return yamldoc.Pos{}
	}
	doc, err := yamldoc.Parse(display, data)
	if err != nil {
		return yamldoc.Pos{}
	}
	list := doc.Root.Get("active_kits")
	if list == nil {
		return yamldoc.Pos{}
	}
	for i, v := range list.Items {
		if s, _ := v.Value.(string); s == kit {
			return doc.Root.PosOf([]string{"active_kits", strconv.Itoa(i)})
		}
	}
	return list.Pos
}
