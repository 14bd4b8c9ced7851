package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
)

var kebabName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// scaffoldSpec is one tool to create.
type scaffoldSpec struct {
	Name         string
	Capability   string
	Description  string
	InputSchema  map[string]any
	OutputSchema map[string]any
}

func (a *App) toolsScaffold() *cobra.Command {
	var capability, dir, fromGaps string
	var force bool
	c := &cobra.Command{
		Use:   "scaffold [NAME] --capability CAP | --from-gaps REPORT.json",
		Short: "Create a working tool skeleton (manifest + executable) that validates and runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := "capflow-tools-scaffold"
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			var specs []scaffoldSpec
			switch {
			case fromGaps != "":
				if len(args) > 0 || capability != "" {
					a.set(envelope.NewBuilder(id).Fail(caperr.InvalidInput, "--from-gaps takes no NAME or --capability", nil), nil)
					return nil
				}
				if specs, err = specsFromGaps(fromGaps); err != nil {
					return err
				}
			case len(args) == 1 && capability != "":
				specs = []scaffoldSpec{{Name: args[0], Capability: capability}}
			default:
				a.set(envelope.NewBuilder(id).Fail(caperr.InvalidInput, "give NAME and --capability CAP, or --from-gaps REPORT.json", nil), nil)
				return nil
			}
			base := dir
			if base == "" {
				base = "tools"
				if len(cfg.ToolsDirs) > 0 {
					base = cfg.ToolsDirs[0]
				}
				base = cfg.Abs(base)
			}
			b := envelope.NewBuilder(id)
			var created []map[string]any
			for _, s := range specs {
				folder := filepath.Join(base, s.Name)
				if dir != "" && len(specs) == 1 && fromGaps == "" {
					folder = dir
					if filepath.Base(dir) != s.Name {
						folder = filepath.Join(dir, s.Name)
					}
				}
				files, err := writeScaffold(folder, s, force)
				if err != nil {
					a.set(b.FailErr(err, map[string]any{"created": created}), nil)
					return nil
				}
				b.Info("scaffold", fmt.Sprintf("created %s for %s in %s", s.Name, s.Capability, relTo(cfg.Root, folder)))
				created = append(created, map[string]any{"name": s.Name, "capability": s.Capability, "dir": folder, "files": files})
			}
			if len(created) == 0 {
				a.set(b.Succeed("no gaps that a new tool can fill", map[string]any{"created": []any{}}), nil)
				return nil
			}
			env := b.Succeed(fmt.Sprintf("created %d tool(s)", len(created)), map[string]any{"created": created})
			a.set(env, func(w io.Writer) {
				fmt.Fprintf(w, "✓ %s\n", env.Message)
				for _, c := range created {
					fmt.Fprintf(w, "  %s (%s) in %s\n", c["name"], c["capability"], relTo(cfg.Root, c["dir"].(string)))
				}
				fmt.Fprintln(w, "next: edit run.sh, then `capflow tools validate` and `capflow tools run NAME --input k=v`")
			})
			return nil
		},
	}
	c.Flags().StringVar(&capability, "capability", "", "the capability the tool provides (domain.action)")
	c.Flags().StringVar(&dir, "dir", "", "where to create the tool (default: the first tools_dirs entry)")
	c.Flags().StringVar(&fromGaps, "from-gaps", "", "a gap report (or `plan check --output json` envelope): one tool per fillable gap")
	c.Flags().BoolVar(&force, "force", false, "overwrite an existing tool folder")
	return c
}

// specsFromGaps reads a gap report, bare or inside a plan check envelope.
func specsFromGaps(path string) ([]scaffoldSpec, error) {
	b, err := yamldoc.ReadFile(path, path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Gaps []gapEntry `json:"gaps"`
		Data *struct {
			Gaps []gapEntry `json:"gaps"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "%s is not a JSON gap report", path)
	}
	gaps := doc.Gaps
	if doc.Data != nil && len(doc.Data.Gaps) > 0 {
		gaps = doc.Data.Gaps
	}
	seen := map[string]bool{}
	var out []scaffoldSpec
	for _, g := range gaps {
		if g.Reason != "no_capability_match" && g.Reason != "schema_incompatible" {
			continue
		}
		if g.ProposedToolName == "" || seen[g.ProposedToolName] {
			continue
		}
		seen[g.ProposedToolName] = true
		out = append(out, scaffoldSpec{Name: g.ProposedToolName, Capability: g.MissingCapability,
			Description: "Provides " + g.MissingCapability + " (scaffolded from a gap in step " + g.StepID + ")",
			InputSchema: g.ProposedInputSchema, OutputSchema: g.ProposedOutputSchema})
	}
	return out, nil
}

type gapEntry struct {
	StepID               string         `json:"step_id"`
	MissingCapability    string         `json:"missing_capability"`
	Reason               string         `json:"reason"`
	ProposedToolName     string         `json:"proposed_tool_name"`
	ProposedInputSchema  map[string]any `json:"proposed_input_schema"`
	ProposedOutputSchema map[string]any `json:"proposed_output_schema"`
}

func writeScaffold(folder string, s scaffoldSpec, force bool) ([]string, error) {
	if !kebabName.MatchString(s.Name) {
		return nil, caperr.New(caperr.InvalidInput, "tool name %q must be kebab-case", s.Name)
	}
	if !manifest.ValidCapability(s.Capability) {
		return nil, caperr.New(caperr.InvalidInput, "capability %q is not domain.action", s.Capability)
	}
	if _, err := os.Stat(folder); err == nil && !force {
		return nil, caperr.New(caperr.InvalidInput, "%s already exists (use --force to overwrite)", folder)
	}
	if s.InputSchema == nil {
		s.InputSchema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	if s.OutputSchema == nil {
		s.OutputSchema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	if s.Description == "" {
		s.Description = "Provides " + s.Capability
	}
	m := map[string]any{
		"name": s.Name, "version": "0.1.0", "description": s.Description,
		"capabilities": []string{s.Capability},
		"input_schema": s.InputSchema, "output_schema": s.OutputSchema,
		"entrypoint": map[string]any{"type": "command", "command": []string{"./run.sh"}},
		"idempotent": false, "stability": "experimental",
		"timeouts": map[string]any{"start_to_close": "5m", "heartbeat": "1m"},
	}
	y, err := yaml.MarshalWithOptions(m, yaml.IndentSequence(true))
	if err != nil {
		return nil, caperr.Wrap(caperr.InternalError, err, "render manifest")
	}
	header := "# " + s.Name + ": generated by `capflow tools scaffold`. Edit freely; contracts: docs/manifests.md\n"
	sample, _ := json.Marshal(schema.Sample(s.OutputSchema))
	script := strings.NewReplacer("{{NAME}}", s.Name, "{{CAP}}", s.Capability, "{{SAMPLE}}", string(sample)).Replace(runTemplate)
	readme := fmt.Sprintf("# %s\n\nProvides `%s`. Generated by `capflow tools scaffold`: describe here what the tool does, what it needs and what it returns (`capflow tools show %s` prints this file with the manifest).\n\n- `tool.yaml`: the manifest (inputs, outputs, timeouts).\n- `run.sh`: the entrypoint. It reads the inputs from `$CAPFLOW_INPUT_PATH` (also on stdin),\n  prints progress events as JSON lines on stderr, and writes its result envelope to `$CAPFLOW_OUTPUT_PATH`.\n\nTry it: `capflow tools run %s`\n", s.Name, s.Capability, s.Name, s.Name)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "create %s", folder)
	}
	files := map[string]struct {
		body string
		mode os.FileMode
	}{"tool.yaml": {header + string(y), 0o644}, "run.sh": {script, 0o755}, registry.DescriptionFile: {readme, 0o644}}
	var names []string
	for _, n := range []string{"tool.yaml", "run.sh", registry.DescriptionFile} {
		f := files[n]
		if err := os.WriteFile(filepath.Join(folder, n), []byte(f.body), f.mode); err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "write %s", n)
		}
		names = append(names, filepath.Join(folder, n))
	}
	// The skeleton must validate: check it now rather than leave a trap.
	data, _ := os.ReadFile(filepath.Join(folder, "tool.yaml"))
	if _, probs := manifest.Parse(filepath.Join(folder, "tool.yaml"), folder, data); len(probs) > 0 {
		return nil, caperr.Wrap(caperr.InvalidInput, probs, "the generated manifest does not validate (check the proposed schemas)")
	}
	return names, nil
}

// runTemplate follows the tool protocol in POSIX sh, with no dependency
// beyond coreutils.
const runTemplate = `#!/bin/sh
# {{NAME}}: provides {{CAP}}. Generated by ` + "`capflow tools scaffold`" + `.
# Protocol (docs/tool-protocol.md): inputs arrive as JSON on stdin and in
# $CAPFLOW_INPUT_PATH; progress events are JSON lines on stderr; the result
# envelope goes to $CAPFLOW_OUTPUT_PATH. Exit 0 exactly when success.
set -eu

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
event() { printf '{"phase":"%s","level":"%s","message":"%s","timestamp":"%s"}\n' "$1" "$2" "$3" "$(now)" >&2; }

started=$(now)
event run info "{{NAME}} started"

# --- your work goes here: read "$CAPFLOW_INPUT_PATH", write artifacts to "$CAPFLOW_WORKDIR" ---
data='{{SAMPLE}}'

out=${CAPFLOW_OUTPUT_PATH:-/dev/stdout}
cat > "$out" <<EOF
{"toolId":"{{NAME}}","exitCode":0,"success":true,"timestamp":"$(now)","message":"{{NAME}} finished (scaffold: no logic yet)","feedback":[{"phase":"run","level":"info","message":"{{NAME}} started","timestamp":"$started"}],"data":$data}
EOF
`
