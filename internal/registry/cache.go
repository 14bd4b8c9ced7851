package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
)

// cacheFormat changes whenever the cached shape changes; an old cache is
// then simply rebuilt.
const cacheFormat = 2

// CacheFile is the cache's name inside state_dir.
const CacheFile = "registry-cache.json"

type cachedProblem struct {
	Code    caperr.Code `json:"code"`
	Message string      `json:"message"`
	File    string      `json:"file"`
	Line    int         `json:"line"`
	Column  int         `json:"column"`
	Field   string      `json:"field"`
}

type cache struct {
	Format      int                  `json:"format"`
	Fingerprint string               `json:"fingerprint"`
	Tools       []*manifest.Manifest `json:"tools"`
	Kits        []*manifest.Kit      `json:"kits"`
	Problems    []cachedProblem      `json:"problems"`
	LeftOut     map[string][]string  `json:"left_out,omitempty"`
}

// fingerprint covers the options and every file's identity (its stamp
// for disk files, stampOf; content for builtin ones), so any change to a
// manifest invalidates the cache.
func fingerprint(opts Options, files []found) string {
	h := sha256.New()
	// Protected decides which sandbox.write a manifest may name: a path
	// newly protected must refuse a cached manifest that writes it.
	fmt.Fprintf(h, "%d|%s|%q|%q|%q|%q|%q|%q\n", cacheFormat, buildID, opts.Root, opts.KitsDirs, opts.ToolsDirs, opts.ActiveKits, opts.Order, opts.Protected)
	for _, f := range files {
		fmt.Fprintf(h, "%s|%s|%s|%s\n", f.kind, f.source, f.name, f.stamp)
		if f.fsys != nil {
			b, _ := f.read()
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildID identifies the running binary, so a new capflow (whose
// validation may differ) never trusts a cache written by an old one.
var buildID = func() string {
	exe, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	st, err := os.Stat(exe)
	if err != nil {
		return exe
	}
	return fmt.Sprintf("%s|%d|%d", exe, st.Size(), st.ModTime().UnixNano())
}()

func readCache(opts Options, fp string) (*Registry, string) {
	p := filepath.Join(abs(opts.Root, opts.StateDir), CacheFile)
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("registry cache %s unreadable (%v); rebuilt", p, err)
	}
	var c cache
	if err := json.Unmarshal(b, &c); err != nil || c.Format == 0 {
		return nil, fmt.Sprintf("registry cache %s is corrupt; rebuilt", p)
	}
	if c.Format != cacheFormat || c.Fingerprint != fp {
		return nil, "" // stale: an ordinary rebuild, nothing to warn about
	}
	r := &Registry{Tools: c.Tools, Kits: c.Kits, LeftOut: c.LeftOut}
	for _, cp := range c.Problems {
		r.Problems = append(r.Problems, caperr.New(cp.Code, "%s", cp.Message).At(cp.File, cp.Line, cp.Column, cp.Field))
	}
	for _, m := range r.Tools {
		if m == nil || m.Name == "" {
			return nil, fmt.Sprintf("registry cache %s is corrupt; rebuilt", p)
		}
	}
	return r, ""
}

func writeCache(opts Options, fp string, r *Registry) error {
	dir := abs(opts.Root, opts.StateDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c := cache{Format: cacheFormat, Fingerprint: fp, Tools: r.Tools, Kits: r.Kits, LeftOut: r.LeftOut}
	for _, p := range r.Problems {
		c.Problems = append(c.Problems, cachedProblem{p.Code, p.Message, p.File, p.Line, p.Column, p.Field})
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	// Write then rename, so a crash never leaves half a cache behind.
	tmp, err := os.CreateTemp(dir, CacheFile+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	tmp.Close()
	return os.Rename(tmp.Name(), filepath.Join(dir, CacheFile))
}
