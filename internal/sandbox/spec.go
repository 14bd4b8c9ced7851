package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/realpath"
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
// absolute against the project and write folders opened beneath it
// (OpenWrites; created when missing). The caller closes the folders.
func SpecFor(m *manifest.Sandbox, project string, protected ...string) (Spec, Folders, error) {
	folders, err := OpenWrites(m, project, protected...)
	if err != nil {
		return Declared(m), nil, err
	}
	return SpecWith(m, project, folders), folders, nil
}

// SpecWith is SpecFor over write folders already open: Spec.Write names
// where they are.
func SpecWith(m *manifest.Sandbox, project string, folders Folders) Spec {
	s := Declared(m)
	for i, r := range s.Read {
		if !filepath.IsAbs(r) {
			s.Read[i] = filepath.Join(project, r)
		}
	}
	s.Write = folders.Reals()
	return s
}

// Folder is a write folder held open from before its tool starts: the
// sandbox binds this handle (--bind-fd), and the step's output files are
// opened beneath it, so a folder swapped for a link while the tool runs
// leads nowhere (the link is never followed).
type Folder struct {
	Name string   // as the manifest writes it
	Real string   // where it was when opened
	Root *os.Root // its handle
	Dir  *os.File // the same folder, for bubblewrap
}

// Given is a file a step's inputs name, opened once (O_PATH): Real is
// where it was when opened.
type Given struct {
	Real string
	File *os.File
}

// GivenFiles are the files a step was given by its inputs.
type GivenFiles []Given

// Close closes their handles.
func (gs GivenFiles) Close() {
	for _, g := range gs {
		g.File.Close()
	}
}

// Folders are a tool's write folders.
type Folders []*Folder

// Close closes their handles.
func (fs Folders) Close() {
	for _, f := range fs {
		f.Dir.Close()
		f.Root.Close()
	}
}

// Reals are where they are.
func (fs Folders) Reals() []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Real)
	}
	return out
}

// OpenWrites opens a manifest's write folders beneath the project (made
// when missing): a link may lead a name elsewhere in the project, never
// out of it, and never to what the engine trusts (protected, besides
// manifest.Protected). Each is checked where its handle really is.
func OpenWrites(m *manifest.Sandbox, project string, protected ...string) (Folders, error) {
	names := Declared(m).Write
	if len(names) == 0 {
		return nil, nil
	}
	root, err := filepath.EvalSymlinks(project)
	if err != nil {
		return nil, fmt.Errorf("sandbox: project %s: %v", project, err)
	}
	proj, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: project %s: %v", project, err)
	}
	defer proj.Close()
	trusted := append(slices.Clone(manifest.Protected), protected...)
	var out Folders
	for _, w := range names {
		f, err := openWrite(proj, root, w, trusted)
		if err != nil {
			out.Close()
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func openWrite(proj *os.Root, root, rel string, trusted []string) (*Folder, error) {
	rel = filepath.Clean(rel)
	if err := proj.MkdirAll(rel, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	sub, err := proj.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("sandbox write %q: %v (it leads out of the project)", rel, err)
	}
	dir, err := sub.Open(".")
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("sandbox write %q: %v", rel, err)
	}
	f := &Folder{Name: rel, Root: sub, Dir: dir}
	// Where the handle is, not where the name leads now.
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", dir.Fd()))
	if err != nil {
		real, err = filepath.EvalSymlinks(filepath.Join(root, rel)) // no /proc: the name, resolved
	}
	if err == nil && (real == root || !strings.HasPrefix(real, root+string(filepath.Separator))) {
		err = fmt.Errorf("sandbox write %q leads to %s, not a folder inside the project", rel, real)
	}
	if err == nil {
		inner, _ := filepath.Rel(root, real)
		if s := manifest.Shelters(trusted, inner); s != "" {
			err = fmt.Errorf("sandbox write %q leads to %s, which holds %s: no tool writes what the engine trusts", rel, real, s)
		} else if s := ShelteredAt(trusted, root, real); s != "" {
			err = fmt.Errorf("sandbox write %q leads to %s, which holds where %s leads: no tool writes what the engine trusts", rel, real, s)
		}
	}
	if err != nil {
		f.Dir.Close()
		f.Root.Close()
		return nil, err
	}
	f.Real = real
	return f, nil
}

// ShelteredAt names the trusted path (relative to root) whose real place,
// or any link on its way there, real (a real path) is, lies in or holds:
// a .capflow linked to var/capflow inside the project is what write:
// [var] would hold (found attacking: a step read other runs and rewrote
// the engine's state), and a write replacing a link midway along
// policy.yaml's changes what the engine reads (found attacking);
// manifest.Shelters compares names.
func ShelteredAt(trusted []string, root, real string) string {
	for _, t := range trusted {
		at, links := realpath.Walk(filepath.Join(root, t))
		for _, place := range append([]string{at}, links...) {
			if realpath.Within(real, place) || realpath.Within(place, real) {
				return t
			}
		}
	}
	return ""
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
