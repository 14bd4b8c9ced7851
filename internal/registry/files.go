package registry

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/kitcache"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/projfile"
)

// onDisk is the folder of built-in kit id on disk (kitcache).
func onDisk(opts Options, id string) (string, error) {
	root := opts.KitCache
	if root == "" {
		var err error
		if root, err = kitcache.Root(); err != nil {
			return "", err
		}
	}
	return kitcache.Materialize(opts.Builtin, id, root)
}

// DescriptionFile is the long description beside a tool.yaml (docs/manifests.md).
const DescriptionFile = "description.md"

// maxDescription bounds a description.md read for show or an LLM prompt.
const maxDescription = 64 << 10

// Description returns a tool's description.md, or "" when it has none. It
// is read when asked for (not cached with the manifests), at most 64 KiB.
func (r *Registry) Description(m *manifest.Manifest) string {
	var b []byte
	if rest, ok := strings.CutPrefix(m.File, "builtin:"); ok {
		if r.builtin == nil {
			return ""
		}
		b, _ = fs.ReadFile(r.builtin, path.Join(path.Dir(rest), DescriptionFile))
	} else if m.Dir != "" {
		b, _ = projfile.ReadIn(m.Dir, filepath.Join(m.Dir, DescriptionFile), DescriptionFile)
	}
	if len(b) > maxDescription {
		b = append(b[:maxDescription], "\n…(truncated)"...)
	}
	return string(b)
}
