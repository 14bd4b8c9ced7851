package config

import (
	"path/filepath"
	"strings"
)

// Protected are the project paths (relative to its root) this
// configuration makes the engine trust beyond the defaults: the state and
// runs folders, tools and kits folders, the configuration file, policy
// and router rules, where they lie inside the project. No tool may write
// them (docs/sandbox.md).
func (c *Config) Protected() []string {
	var out []string
	for _, p := range append(append([]string{c.StateDir, c.RunsDir, c.Policy, c.Router.Rules, c.File}, c.ToolsDirs...), c.KitsDirs...) {
		if p == "" {
			continue
		}
		if rel, err := filepath.Rel(c.Root, c.Abs(p)); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
			out = append(out, rel)
		}
	}
	return out
}
