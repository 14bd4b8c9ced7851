package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/manifest"
)

// SpecFor is a tool's spec: its manifest's `sandbox:` over Defaults, with
// read paths made absolute against the project and write paths resolved
// (symlinks too) and kept inside it. A declared write folder that does not
// exist yet is created.
func SpecFor(m *manifest.Sandbox, project string) (Spec, error) {
	s := Defaults
	if m == nil {
		return s, nil
	}
	s.Network = m.Network
	if m.Memory > 0 {
		s.Memory = int64(m.Memory)
	}
	if m.Pids > 0 {
		s.Pids = m.Pids
	}
	if m.CPU > 0 {
		s.CPU = m.CPU.D()
	}
	if m.FileSize > 0 {
		s.FileSize = int64(m.FileSize)
	}
	for _, r := range m.Read {
		if r == "project" {
			continue
		}
		if !filepath.IsAbs(r) {
			r = filepath.Join(project, r)
		}
		s.Read = append(s.Read, r)
	}
	for _, w := range m.Write {
		if w == "step" {
			continue
		}
		p, err := insideProject(project, w)
		if err != nil {
			return s, err
		}
		s.Write = append(s.Write, p)
	}
	return s, nil
}

func insideProject(project, rel string) (string, error) {
	root, err := filepath.EvalSymlinks(project)
	if err != nil {
		return "", fmt.Errorf("sandbox: project %s: %v", project, err)
	}
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("sandbox write %q leads to %s, outside the project", rel, real)
	}
	return real, nil
}
