// Package realpath says where a path really is: links followed, a missing
// end kept beneath where the rest really is, and a link that leads
// nowhere yet taken where it would lead. The sandbox binds folders there
// (bubblewrap cannot bind onto a path that runs through a link), and what
// the engine trusts is compared there, never by name.
package realpath

import (
	"os"
	"path/filepath"
)

// maxLinks bounds the links followed by hand (the kernel's own bound).
const maxLinks = 40

// Of is where p really is.
func Of(p string) string { return of(p, maxLinks) }

func of(p string, links int) string {
	if p == "" {
		return p
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	// A link whose target is missing: where it would lead (found
	// attacking: policy.yaml a link to conf/policy.yaml, not there yet,
	// was taken by its own name and write: [conf] let a step make it).
	if to, err := os.Readlink(p); err == nil && links > 0 {
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(p), to)
		}
		return of(to, links-1)
	}
	dir := filepath.Dir(p)
	if dir == p {
		return p
	}
	return filepath.Join(of(dir, links), filepath.Base(p))
}
