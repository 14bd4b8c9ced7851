// Package registry scans kits and project tools, validates their
// manifests, and indexes capabilities to candidate tools in the order of
// docs/manifests.md.
package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/kitcache"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/projfile"
	"github.com/capflow/capflow/internal/suggest"
)

// Resolution-order source groups.
const (
	ProjectTools = "project_tools"
	ActiveKits   = "active_kits"
)

// Options say where to look. Paths are relative to Root unless absolute.
type Options struct {
	Root       string
	KitsDirs   []string
	ToolsDirs  []string
	ActiveKits []string
	// Order is tool_resolution_order; empty means [project_tools, active_kits].
	Order []string
	// StateDir holds the cache; empty disables it.
	StateDir string
	// Builtin holds kits shipped inside the binary: <id>/kit.yaml, <id>/<tool>/tool.yaml.
	Builtin fs.FS
	// KitCache is where a built-in kit whose tools run files is put on
	// disk (kitcache; empty: kitcache.Root()).
	KitCache string
	// ConfigFile is named in problems about active_kits.
	ConfigFile string
	// Protected are the project's paths no tool's sandbox.write may name
	// beyond the defaults (config.Config.Protected).
	Protected []string
	Logger    hclog.Logger
	// Memo, when set, keeps the last registry loaded with these options:
	// while the tools' files are as they were (the same fingerprint) it is
	// answered again, not read from the cache file (a worker's Resolve
	// read it for every run: a tenth of its CPU under load); once answered
	// again, it watches their folders, and loads look at no file until one
	// changed (memo.go).
	Memo *Memo
}

// Registry is the loaded, validated set of tools.
type Registry struct {
	Tools    []*manifest.Manifest `json:"tools"`
	Kits     []*manifest.Kit      `json:"kits"`
	Problems caperr.Problems      `json:"-"`
	// LeftOut names, for a capability, the manifests left out for their
	// problems that declare it (manifest.Declared).
	LeftOut map[string][]string `json:"-"`
	// Warnings are things the user should know that broke nothing (e.g. a
	// corrupt cache that was rebuilt).
	Warnings []string `json:"-"`

	order   []string
	kitRank map[string]int
	byCap   map[string][]*manifest.Manifest
	builtin fs.FS
}

// Load scans every source and builds the index, using the cache in
// StateDir when no manifest changed since it was written.
func Load(opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if len(opts.Order) == 0 {
		opts.Order = []string{ProjectTools, ActiveKits}
	}
	for _, o := range opts.Order {
		if o != ProjectTools && o != ActiveKits {
			return nil, caperr.New(caperr.ConfigError, "tool_resolution_order: unknown source %q (want project_tools or active_kits)", o)
		}
	}
	if r := opts.Memo.unchanged(opts); r != nil {
		return r, nil
	}
	files, err := discover(opts)
	if err != nil {
		return nil, err
	}
	fp := fingerprint(opts, files)
	if r := opts.Memo.get(fp); r != nil {
		opts.Memo.watch(opts, fp, files)
		return r, nil
	}
	var warnings []string
	if opts.StateDir != "" {
		r, warn := readCache(opts, fp)
		if r != nil {
			r.index(opts)
			opts.Memo.put(fp, r)
			return r, nil
		}
		if warn != "" {
			warnings = append(warnings, warn)
			opts.Logger.Warn("registry cache rebuilt", "reason", warn)
		}
	}
	r := build(opts, files)
	r.Warnings = append(warnings, r.Warnings...)
	r.index(opts)
	if opts.StateDir != "" {
		if err := writeCache(opts, fp, r); err != nil {
			r.Warnings = append(r.Warnings, "registry cache not written: "+err.Error())
			opts.Logger.Warn("registry cache not written", "error", err)
		}
	}
	opts.Memo.put(fp, r)
	return r, nil
}

// found is one manifest or kit file on disk or in the binary.
type found struct {
	kind    string // "kit" or "tool"
	source  string // "project" or "kit:<id>"
	kit     string
	display string // path shown to users
	dir     string // tool folder (absolute for disk tools)
	fsys    fs.FS  // non-nil for builtin files
	name    string // path inside fsys, or absolute disk path
	stamp   string // what its stat says of its contents (stampOf)
	cached  bool   // a built-in kit's copy on disk (kitcache)
}

func abs(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func discover(opts Options) ([]found, error) {
	var out []found
	addDir := func(source, kit, dir string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !toolFolder(e) {
				continue
			}
			f := filepath.Join(dir, e.Name(), "tool.yaml")
			st, err := os.Stat(f)
			if err != nil {
				continue
			}
			out = append(out, found{kind: "tool", source: source, kit: kit, display: rel(opts.Root, f), dir: filepath.Dir(f), name: f, stamp: stampOf(st)})
		}
	}
	for _, td := range opts.ToolsDirs {
		addDir("project", "", abs(opts.Root, td))
	}
	for _, id := range opts.ActiveKits {
		located := false
		for _, kd := range opts.KitsDirs {
			kf := filepath.Join(abs(opts.Root, kd), id, "kit.yaml")
			if st, err := os.Stat(kf); err == nil {
				out = append(out, found{kind: "kit", source: "kit:" + id, kit: id, display: rel(opts.Root, kf), name: kf, stamp: stampOf(st)})
				addDir("kit:"+id, id, filepath.Dir(kf))
				located = true
				break
			}
		}
		if located || opts.Builtin == nil {
			if !located {
				out = append(out, found{kind: "missing-kit", kit: id})
			}
			continue
		}
		if _, err := fs.Stat(opts.Builtin, path.Join(id, "kit.yaml")); err != nil {
			out = append(out, found{kind: "missing-kit", kit: id})
			continue
		}
		if kitcache.NeedsDisk(opts.Builtin, id) {
			// Its tools run files: from their copy on disk.
			dir, err := onDisk(opts, id)
			if err != nil {
				out = append(out, found{kind: "unwritable-kit", kit: id, display: err.Error()})
				continue
			}
			kf := filepath.Join(dir, "kit.yaml")
			out = append(out, found{kind: "kit", source: "kit:" + id, kit: id, display: rel(opts.Root, kf), name: kf, cached: true})
			addDir("kit:"+id, id, dir)
			continue
		}
		out = append(out, found{kind: "kit", source: "kit:" + id, kit: id, display: "builtin:" + id + "/kit.yaml", fsys: opts.Builtin, name: path.Join(id, "kit.yaml")})
		entries, _ := fs.ReadDir(opts.Builtin, id)
		for _, e := range entries {
			p := path.Join(id, e.Name(), "tool.yaml")
			if _, err := fs.Stat(opts.Builtin, p); e.IsDir() && err == nil {
				out = append(out, found{kind: "tool", source: "kit:" + id, kit: id, display: "builtin:" + p, fsys: opts.Builtin, name: p})
			}
		}
	}
	return out, nil
}

// toolFolder reports whether a tools or kit folder's entry is where a
// tool is looked for: a folder (not a link), not hidden.
func toolFolder(e fs.DirEntry) bool { return e.IsDir() && !strings.HasPrefix(e.Name(), ".") }

func (f found) read() ([]byte, error) {
	if f.fsys != nil {
		return fs.ReadFile(f.fsys, f.name)
	}
	// Beneath the tool's own folder: a tool.yaml linked out of it (to
	// ~/.aws/credentials) is refused unread.
	return projfile.ReadIn(filepath.Dir(f.name), f.name, f.name)
}

func build(opts Options, files []found) *Registry {
	r := &Registry{}
	seen := map[string]map[string]*manifest.Manifest{} // source -> name -> first
	for _, f := range files {
		switch f.kind {
		case "missing-kit":
			cfg := opts.ConfigFile
			if cfg == "" {
				cfg = "capflow.yaml"
			}
			pos := configPos(opts, cfg, f.kit)
			r.Problems = append(r.Problems, caperr.New(caperr.ConfigError, "active kit %q not found in kits_dirs %v nor built in%s", f.kit, opts.KitsDirs, suggest.Phrase(f.kit, knownKits(opts))).At(cfg, pos.Line, pos.Column, "active_kits"))
		case "unwritable-kit":
			r.Problems = append(r.Problems, caperr.New(caperr.ConfigError, "%s", f.display).At(opts.ConfigFile, 0, 0, "active_kits"))
		case "kit":
			data, err := f.read()
			if err != nil {
				r.Problems = append(r.Problems, caperr.Wrap(caperr.ConfigError, err, "cannot read kit").At(f.display, 0, 0, ""))
				continue
			}
			k, probs := manifest.ParseKit(f.display, data)
			r.Problems = append(r.Problems, probs...)
			if k != nil {
				k.Builtin = f.fsys != nil
				if k.ID != f.kit {
					r.Problems = append(r.Problems, caperr.New(caperr.InvalidInput, "kit id %q does not match its folder %q", k.ID, f.kit).At(f.display, 1, 1, "id"))
				}
				r.Kits = append(r.Kits, k)
			}
		case "tool":
			data, err := f.read()
			if err != nil {
				why := err.Error()
				var ce *caperr.Error
				if errors.As(err, &ce) {
					why = ce.Message // its file is this problem's
				}
				r.Problems = append(r.Problems, caperr.New(caperr.InvalidInput, "cannot read manifest: %s", why).At(f.display, 0, 0, ""))
				continue
			}
			m, probs := manifest.ParseWith(f.display, f.dir, data, manifest.Options{Protected: opts.Protected})
			r.Problems = append(r.Problems, probs...)
			if m == nil {
				r.leaveOut(f.display, data)
				continue
			}
			m.Source, m.Kit = f.source, f.kit
			if seen[f.source] == nil {
				seen[f.source] = map[string]*manifest.Manifest{}
			}
			if first := seen[f.source][m.Name]; first != nil {
				r.Problems = append(r.Problems, caperr.New(caperr.InvalidInput, "duplicate tool name %q in %s (first defined in %s)", m.Name, f.source, first.File).At(m.File, m.Line, 1, "name"))
				continue
			}
			seen[f.source][m.Name] = m
			r.Tools = append(r.Tools, m)
		}
	}
	r.Problems.Sort()
	return r
}

func (r *Registry) index(opts Options) {
	r.builtin = opts.Builtin
	r.order = opts.Order
	r.kitRank = map[string]int{}
	for i, k := range opts.ActiveKits {
		r.kitRank[k] = i
	}
	r.byCap = map[string][]*manifest.Manifest{}
	for _, m := range r.Tools {
		for _, c := range m.Capabilities {
			r.byCap[c] = append(r.byCap[c], m)
		}
	}
	for c := range r.byCap {
		list := r.byCap[c]
		sort.SliceStable(list, func(i, j int) bool { return r.less(list[i], list[j]) })
	}
	sort.SliceStable(r.Tools, func(i, j int) bool {
		if r.Tools[i].Name != r.Tools[j].Name {
			return r.Tools[i].Name < r.Tools[j].Name
		}
		return r.less(r.Tools[i], r.Tools[j])
	})
}

// group returns the tool_resolution_order index of a tool's source.
func (r *Registry) group(m *manifest.Manifest) int {
	g := ActiveKits
	if m.Source == "project" {
		g = ProjectTools
	}
	for i, o := range r.order {
		if o == g {
			return i
		}
	}
	return len(r.order)
}

// less is the contract's ranking: source order, stable first, higher
// priority, higher version, name; then kit order for full ties.
func (r *Registry) less(a, b *manifest.Manifest) bool {
	if ga, gb := r.group(a), r.group(b); ga != gb {
		return ga < gb
	}
	if (a.Stability == "stable") != (b.Stability == "stable") {
		return a.Stability == "stable"
	}
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if c := manifest.CompareVersions(a.Version, b.Version); c != 0 {
		return c > 0
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return r.kitRank[a.Kit] < r.kitRank[b.Kit]
}

// Capabilities lists every capability some tool provides, sorted.
func (r *Registry) Capabilities() []string {
	out := make([]string, 0, len(r.byCap))
	for c := range r.byCap {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Providers returns the tools that provide c, best first.
func (r *Registry) Providers(c string) []*manifest.Manifest { return r.byCap[c] }

// Tool finds a tool by name and optional version prefix, best first.
func (r *Registry) Tool(name, versionPrefix string) *manifest.Manifest {
	if versionPrefix != "" {
		name += "@" + versionPrefix
	}
	return r.Pinned(name)
}

// Pinned is the best-ranked tool a pin or uid names
// ([origin/]name[@version-prefix]), or nil.
func (r *Registry) Pinned(pin string) *manifest.Manifest {
	var best *manifest.Manifest
	for _, m := range r.Tools {
		if Pinned(m, pin) {
			if best == nil || r.less(m, best) {
				best = m
			}
		}
	}
	return best
}

// Summary is a one-line description for logs.
func (r *Registry) Summary() string {
	return fmt.Sprintf("%s, %s, %s, %s", caperr.Count(len(r.Tools), "tool"), caperr.Count(len(r.byCap), "capability"), caperr.Count(len(r.Kits), "kit"), caperr.Count(len(r.Problems), "problem"))
}
