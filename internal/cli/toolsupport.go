package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/suggest"
)

// toolPhases frames a successful tool run's feedback with the phases
// capflow took it through: the tool chosen, its inputs checked, its output
// checked.
func toolPhases(m *manifest.Manifest, began time.Time, fb []envelope.Feedback) []envelope.Feedback {
	// Stamped within the tool's own entries, whose clocks may be coarser:
	// an envelope's feedback is in time order.
	start, now := envelope.Timestamp(began), envelope.Timestamp(envelope.Now())
	if len(fb) > 0 {
		if t, err := time.Parse(time.RFC3339Nano, fb[0].Timestamp); err == nil && t.Before(began) {
			start = fb[0].Timestamp
		}
		if t, err := time.Parse(time.RFC3339Nano, fb[len(fb)-1].Timestamp); err == nil && t.After(envelope.Now()) {
			now = fb[len(fb)-1].Timestamp
		}
	}
	out := []envelope.Feedback{
		{Phase: "resolve", Level: envelope.LevelInfo, Message: fmt.Sprintf("%s@%s (%s)", m.Name, m.Version, m.Source), Timestamp: start},
		{Phase: "validate", Level: envelope.LevelInfo, Message: "inputs match the tool's input_schema", Timestamp: start},
	}
	out = append(out, fb...)
	return append(out, envelope.Feedback{Phase: "result", Level: envelope.LevelInfo, Message: "output matches the tool's output_schema", Timestamp: now})
}

// toolPhrase is " (did you mean ...?)" for a name close to a tool's or a
// capability's, or "".
func toolPhrase(reg *registry.Registry, arg string) string {
	names := reg.Capabilities()
	for _, m := range reg.Tools {
		names = append(names, m.Name)
	}
	_, name, _ := registry.SplitPin(arg)
	return suggest.Phrase(name, names)
}

// missingDescriptions warns of tools on disk with no description.md
// beside their tool.yaml: tools show prints it, and it is where a tool
// says what it needs, returns and bounds.
func missingDescriptions(root string, tools []*manifest.Manifest) []string {
	var out []string
	for _, m := range tools {
		if m.Dir == "" || strings.HasPrefix(m.File, "builtin:") {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.Dir, registry.DescriptionFile)); errors.Is(err, fs.ErrNotExist) {
			out = append(out, fmt.Sprintf("%s: no %s beside it (what the tool does, needs and returns; capflow tools show prints it)", relTo(root, m.File), registry.DescriptionFile))
		}
	}
	return out
}

func findTool(reg *registry.Registry, arg string) *manifest.Manifest {
	if m := reg.Pinned(arg); m != nil {
		return m
	}
	if manifest.ValidCapability(arg) {
		if res, err := reg.Resolve(arg, ""); err == nil {
			return res.Chosen.Manifest
		}
	}
	return nil
}

// Runs says what a step of tool m executes, for people (dry runs, show).
func Runs(m *manifest.Manifest) string {
	switch m.Entrypoint.Type {
	case manifest.EntryCommand:
		return "command: " + strings.Join(m.Entrypoint.Command, " ") + " (in " + m.Dir + ")"
	case manifest.EntryBuiltin:
		return "builtin: " + m.Entrypoint.Name
	case manifest.EntryMCP:
		return "mcp: tool " + m.Entrypoint.Tool + " of server " + m.Entrypoint.Server
	case manifest.EntryHTTP:
		method := m.Entrypoint.Method
		if method == "" {
			method = "POST"
		}
		return "http: " + method + " " + m.Entrypoint.URL
	}
	return m.Entrypoint.Type
}

func prettyDefinition(w io.Writer, d ToolDefinition) {
	m := d.Manifest
	fmt.Fprintf(w, "%s@%s  %s\n  %s\n\n", m.Name, m.Version, strings.Join(m.Capabilities, ", "), m.Description)
	rows := [][]string{
		{"  uid", d.UID}, {"  source", d.Source}, {"  path", d.Path}, {"  digest", d.Digest}, {"  runs", d.Runs}, {"  sandbox", d.Confinement},
		{"  idempotent", fmt.Sprint(m.Idempotent)}, {"  stability", m.Stability}, {"  priority", fmt.Sprint(m.Priority)},
	}
	if m.Limits != nil {
		rows = append(rows, []string{"  limits", m.Limits.Describe() + " (across every run and worker)"})
	}
	table(w, []string{"  FIELD", "VALUE"}, rows)
	for _, s := range []struct {
		name string
		v    map[string]any
	}{{"input_schema", m.InputSchema}, {"output_schema", m.OutputSchema}} {
		b, _ := json.MarshalIndent(s.v, "  ", "  ")
		fmt.Fprintf(w, "\n%s:\n  %s\n", s.name, b)
	}
	if d.Description != "" {
		fmt.Fprintf(w, "\n%s:\n\n%s\n", registry.DescriptionFile, strings.TrimRight(d.Description, "\n"))
	} else {
		fmt.Fprintf(w, "\n(no %s beside %s)\n", registry.DescriptionFile, d.Path)
	}
}
