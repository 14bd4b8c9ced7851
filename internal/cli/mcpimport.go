package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
)

// toolsImportMCP writes a tool.yaml (and description.md) for each tool an
// MCP server lists (docs/mcp.md).
func (a *App) toolsImportMCP() *cobra.Command {
	var prefix, dir string
	var force bool
	c := &cobra.Command{
		Use:   "import-mcp SERVER",
		Short: "Write a tool.yaml for each tool of an MCP server named in capflow.yaml's mcp_servers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.loadProject()
			if err != nil {
				return err
			}
			server := args[0]
			if _, ok := p.Config.MCPServers[server]; !ok {
				return caperr.New(caperr.ConfigError, "MCP server %q is not in mcp_servers of the project's capflow.yaml (docs/mcp.md)", server)
			}
			if prefix == "" {
				prefix = snake(server)
			}
			if !prefixRE.MatchString(prefix) {
				return caperr.New(caperr.InvalidInput, "--capability-prefix %q: want lowercase letters, digits and _ (the capability's domain)", prefix)
			}
			base := dir
			if base == "" {
				base = "tools"
				if len(p.Config.ToolsDirs) > 0 {
					base = p.Config.ToolsDirs[0]
				}
			}
			base = p.Config.Abs(base)
			pool := p.MCP(Version)
			defer pool.Close()
			ctx, cancel := context.WithCancel(a.ctx)
			defer cancel()
			tools, info, err := pool.Tools(ctx, server)
			if err != nil {
				return err
			}
			b := envelope.NewBuilder("capflow-tools-import-mcp")
			imported, refused := []map[string]any{}, []map[string]any{}
			for _, t := range tools {
				m, err := importTool(base, server, prefix, info, t, force)
				if err != nil {
					b.Warn("import", fmt.Sprintf("%s: %v", t.Name, err))
					refused = append(refused, map[string]any{"tool": t.Name, "reason": err.Error()})
					continue
				}
				imported = append(imported, m)
			}
			data := map[string]any{"server": server, "imported": imported, "refused": refused}
			if len(imported) == 0 {
				a.set(b.Fail(caperr.InvalidInput, fmt.Sprintf("nothing imported from MCP server %s (%d tool(s) refused)", server, len(refused)), data), nil)
				return nil
			}
			counts := map[string]int{}
			for _, m := range imported {
				counts[m["status"].(string)]++
			}
			msg := fmt.Sprintf("imported %d tool(s) of MCP server %s (%s %s)", counts["written"], server, info.Name, info.Version)
			if n := counts["unchanged"] + counts["kept"]; n > 0 {
				msg += fmt.Sprintf("; %d imported before, kept as they are (--force replaces them)", n)
			}
			env := b.Succeed(msg, data)
			a.set(env, func(w io.Writer) {
				fmt.Fprintf(w, "✓ %s\n", env.Message)
				for _, m := range imported {
					fmt.Fprintf(w, "  %s → %s (%s, %s)\n", m["capability"], m["name"], relTo(p.Config.Root, m["dir"].(string)), m["status"])
				}
				for _, r := range refused {
					fmt.Fprintf(w, "  ✗ %s: %s\n", r["tool"], r["reason"])
				}
			})
			return nil
		},
	}
	c.Flags().StringVar(&prefix, "capability-prefix", "", "the capabilities' domain (default: the server's name): PREFIX.tool_name")
	c.Flags().StringVar(&dir, "dir", "", "where the tool folders go (default: the first tools_dirs entry)")
	c.Flags().BoolVar(&force, "force", false, "replace tool.yaml files that exist")
	return c
}

// importTool writes one tool's folder and checks the manifest it wrote
// parses (a schema capflow cannot compile refuses the tool).
func importTool(base, server, prefix string, info *mcp.Implementation, t *mcp.Tool, force bool) (map[string]any, error) {
	name := kebab(server + "-" + t.Name)
	capability := prefix + "." + snake(t.Name)
	if !manifest.ValidCapability(capability) {
		return nil, fmt.Errorf("no capability can be made of its name (%q)", capability)
	}
	desc := strings.TrimSpace(t.Description)
	short := strings.TrimSpace(caperr.FirstLine(desc))
	if len(short) > 200 {
		short = short[:200] + "…"
	}
	if short == "" {
		short = fmt.Sprintf("%s of MCP server %s", t.Name, server)
	}
	idem := t.Annotations != nil && (t.Annotations.ReadOnlyHint || t.Annotations.IdempotentHint)
	doc := yaml.MapSlice{
		{Key: "name", Value: name},
		{Key: "version", Value: semverOf(info.Version)},
		{Key: "description", Value: short},
		{Key: "capabilities", Value: []string{capability}},
		{Key: "input_schema", Value: plainJSON(t.InputSchema)},
	}
	if t.OutputSchema != nil {
		doc = append(doc, yaml.MapItem{Key: "output_schema", Value: plainJSON(t.OutputSchema)})
	}
	doc = append(doc,
		yaml.MapItem{Key: "entrypoint", Value: yaml.MapSlice{{Key: "type", Value: "mcp"}, {Key: "server", Value: server}, {Key: "tool", Value: t.Name}}},
		yaml.MapItem{Key: "idempotent", Value: idem})
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Imported from MCP server %s (%s %s) by capflow tools import-mcp.\n", server, info.Name, info.Version)
	raw := append([]byte(header), out...)
	folder := filepath.Join(base, name)
	file := filepath.Join(folder, "tool.yaml")
	if _, probs := manifest.Parse(file, folder, raw); len(probs) > 0 {
		return nil, errors.New(probs.Error())
	}
	entry := map[string]any{"tool": t.Name, "name": name, "capability": capability, "dir": folder, "idempotent": idem}
	if old, err := os.ReadFile(file); err == nil && !force {
		// Imported before: kept as it is (it may have been edited).
		entry["status"] = "kept"
		if string(old) == string(raw) {
			entry["status"] = "unchanged"
		}
		return entry, nil
	}
	entry["status"] = "written"
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		return nil, err
	}
	if desc != "" {
		if err := os.WriteFile(filepath.Join(folder, "description.md"), []byte(desc+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return entry, nil
}

// plainJSON is a schema as plain maps (the SDK hands them over as it got
// them; YAML writes them in key order).
func plainJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

var (
	camel    = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)
	prefixRE = regexp.MustCompile(`^[a-z0-9_]+$`)
)

// snake is a tool name as a capability's action: getSum, get-sum → get_sum.
func snake(s string) string {
	s = strings.ToLower(camel.ReplaceAllString(s, "${1}_${2}"))
	s = nonAlnum.ReplaceAllString(s, "_")
	return strings.Trim(s, "_")
}

// kebab is a tool's manifest name: everything-getSum → everything-get-sum.
func kebab(s string) string { return strings.ReplaceAll(snake(s), "_", "-") }

var semverRE = regexp.MustCompile(`^\d+\.\d+\.\d+`)

func semverOf(v string) string {
	if m := semverRE.FindString(v); m != "" {
		return m
	}
	return "0.0.0"
}
