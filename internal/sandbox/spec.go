package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/manifest"
)

// Declared is a tool's spec as its manifest writes it: the `sandbox:`
// block over Defaults, paths as written ("project" and "step" left out).
func Declared(m *manifest.Sandbox) Spec {
	s := Defaults
	if m == nil {
		return s
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
	s.Read = without(m.Read, "project")
	s.Write = without(m.Write, "step")
	return s
}

func without(xs []string, skip string) []string {
	var out []string
	for _, x := range xs {
		if x != skip {
			out = append(out, x)
		}
	}
	return out
}

// SpecFor is a tool's spec to run with: Declared, with read paths made
// absolute against the project and write paths resolved (symlinks too)
// and kept inside it. A declared write folder not there yet is created.
func SpecFor(m *manifest.Sandbox, project string, protected ...string) (Spec, error) {
	s := Declared(m)
	for i, r := range s.Read {
		if !filepath.IsAbs(r) {
			s.Read[i] = filepath.Join(project, r)
		}
	}
	for i, w := range s.Write {
		p, err := insideProject(project, w, append(slices.Clone(manifest.Protected), protected...))
		if err != nil {
			return s, err
		}
		s.Write[i] = p
	}
	return s, nil
}

// insideProject resolves a declared write folder: created through an
// os.Root of the project (a symlink cannot lead the creation out of it),
// then resolved and checked to stay inside.
func insideProject(project, rel string, protected []string) (string, error) {
	root, err := filepath.EvalSymlinks(project)
	if err != nil {
		return "", fmt.Errorf("sandbox: project %s: %v", project, err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", fmt.Errorf("sandbox: project %s: %v", project, err)
	}
	defer r.Close()
	if err := r.MkdirAll(filepath.Clean(rel), 0o755); err != nil {
		return "", fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	if real == root || !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("sandbox write %q leads to %s, not a folder inside the project", rel, real)
	}
	// What the engine trusts, checked again where the folder really is (a
	// link in the project can lead a harmless name there).
	if inner, _ := filepath.Rel(root, real); manifest.Shelters(protected, inner) != "" {
		return "", fmt.Errorf("sandbox write %q leads to %s, which holds %s: no tool writes what the engine trusts", rel, real, manifest.Shelters(protected, inner))
	}
	return real, nil
}

// Confinement says how a tool runs, for `tools show` and `plan check`: a
// command tool (or a builtin that starts processes) confined with what
// it declared; other builtins in the worker; http tools as a call.
func Confinement(m *manifest.Manifest) string {
	switch {
	case m.Entrypoint.Type == manifest.EntryCommand:
		return "confined: " + Declared(m.Sandbox).Describe()
	case m.Sandbox != nil:
		// A builtin that starts a server: its tree runs until stopped.
		s := Declared(m.Sandbox)
		s.CPU = 0
		return "server confined: " + s.Describe()
	case m.Entrypoint.Type == manifest.EntryHTTP:
		return "an HTTP call from the worker"
	case m.Entrypoint.Type == manifest.EntryMCP:
		return "a call to MCP server " + m.Entrypoint.Server + " (not confined by capflow: the server runs as configured)"
	}
	return "in the worker: files only inside the project and the run folder"
}

// Beyond lists what a manifest declares beyond the default confinement
// (empty: the defaults): what a reviewer of a plan looks at.
func Beyond(m *manifest.Sandbox) []string {
	if m == nil {
		return nil
	}
	s, d := Declared(m), Defaults
	var out []string
	if s.Network {
		out = append(out, "network: public addresses through capflow's egress proxy")
	}
	for _, w := range s.Write {
		out = append(out, "writes "+w)
	}
	for _, r := range s.Read {
		out = append(out, "reads "+r)
	}
	if s.Memory > d.Memory {
		out = append(out, "memory "+Bytes(s.Memory))
	}
	if s.Pids > d.Pids {
		out = append(out, fmt.Sprintf("pids %d", s.Pids))
	}
	if s.CPU > d.CPU {
		out = append(out, "cpu "+s.CPU.String())
	}
	if s.FileSize > d.FileSize {
		out = append(out, "file_size "+Bytes(s.FileSize))
	}
	return out
}
