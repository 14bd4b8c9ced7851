// Package realpath says where a path really is, walking it much as the
// kernel does: one part at a time, ".." from where the walk really is,
// links followed, a missing end kept by name beneath where the rest
// really is (where the kernel would stop), and a link that leads nowhere
// yet taken where it would lead. The sandbox binds
// folders there (bubblewrap cannot bind onto a path that runs through a
// link), and what the engine trusts is compared there, never by name.
package realpath

import (
	"os"
	"path/filepath"
	"strings"
)

// maxLinks bounds the links followed (the kernel's own bound).
const maxLinks = 40

// Of is where p really is.
func Of(p string) string {
	real, _ := Walk(p)
	return real
}

// Walk is where p really is, and each link the walk passes through, where
// that link lies: replacing any of them changes where p leads (found
// attacking: a write replaced a link midway along policy.yaml's). A walk
// past maxLinks links (a loop) leads nowhere: p's own name.
func Walk(p string) (string, []string) {
	if p == "" {
		return p, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p, nil
	}
	var links []string
	parts, cur := strings.Split(abs, "/"), "/"
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		st, err := os.Lstat(next)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			cur = next // a folder, a file, or missing: its name kept
			continue
		}
		links = append(links, next) // the one at the limit too: replaced, it would end the loop
		to, err := os.Readlink(next)
		if err != nil || len(links) > maxLinks {
			return abs, links
		}
		if filepath.IsAbs(to) {
			cur = "/"
		}
		parts = append(strings.Split(to, "/"), parts...)
	}
	return cur, links
}

// Within reports whether p is root or lies beneath it ("/" holds all).
func Within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
