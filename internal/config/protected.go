package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/realpath"
)

// Protected are the project paths (relative to its root) this
// configuration makes the engine trust beyond the defaults: the state and
// runs folders, tools and kits folders, the configuration file, policy
// and router rules, and what its stdio MCP servers run (unconfined: their
// command, the files their arguments name, the folders holding those),
// where they lie inside the project. No tool may write them
// (docs/sandbox.md).
func (c *Config) Protected() []string {
	var out []string
	for _, p := range append(append(append([]string{c.StateDir, c.RunsDir, c.Policy, c.Router.Rules, c.File}, c.ToolsDirs...), c.KitsDirs...), c.mcpFiles()...) {
		if p == "" {
			continue
		}
		// By name and where each really is: a project reached through a
		// link, a tools_dirs entry naming the real path (found attacking).
		for _, pair := range [][2]string{{c.Root, c.Abs(p)}, {realpath.Of(c.Root), realpath.Of(c.Abs(p))}} {
			if rel, err := filepath.Rel(pair[0], pair[1]); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	return out
}

// mcpFiles are what the stdio MCP servers run: a command or argument that
// names a file or folder (relative to the server's dir), and the folder
// holding each such file (a script's modules lie beside it), each
// absolute.
func (c *Config) mcpFiles() []string {
	var out []string
	for _, srv := range c.MCPServers {
		dir := c.Root
		if srv.Dir != "" {
			dir = c.Abs(srv.Dir)
			if dir != c.Root {
				out = append(out, dir)
			}
		}
		for _, a := range srv.Command {
			if a == "" || strings.HasPrefix(a, "-") {
				continue
			}
			p := a
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			st, err := os.Stat(p)
			if err != nil {
				continue
			}
			out = append(out, p)
			if !st.IsDir() && filepath.Dir(p) != c.Root {
				out = append(out, filepath.Dir(p))
			}
		}
	}
	return out
}

// Private are the folders of the project (absolute) a step sees only its
// own run of: the runs folder (other runs' inputs and results) and the
// engine's state (cache entries, artifacts).
func (c *Config) Private() []string {
	return []string{c.Abs(c.StateDir), c.Abs(c.RunsDir)}
}
