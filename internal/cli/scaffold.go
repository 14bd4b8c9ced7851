package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
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
	// Entrypoint is command, http or builtin; URL and Builtin go with the
	// last two.
	Entrypoint, URL, Builtin string
	// Step and Why: the gap a spec came from (--from-gaps), and why the
	// step had no tool.
	Step, Why string
}

func (a *App) toolsScaffold() *cobra.Command {
	var capability, dir, fromGaps, inSchema, outSchema string
	var force, writeTmpl, alongside bool
	ep := scaffoldSpec{Entrypoint: "command"}
	c := &cobra.Command{
		Use:   "scaffold [NAME] --capability CAP [--input-schema FILE] [--output-schema FILE] [--entrypoint command|http|builtin] | --from-gaps REPORT.json | --write-templates",
		Short: "Create a working tool skeleton (manifest + executable) that validates and runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := "capflow-tools-scaffold"
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if writeTmpl {
				files, err := writeTemplates(cfg.Root)
				if err != nil {
					return err
				}
				a.set(envelope.NewBuilder(id).Succeed(fmt.Sprintf("wrote the tool templates to %s: edit them; tools scaffold uses them from now on", relTo(cfg.Root, filepath.Join(cfg.Root, TemplatesDir))),
					map[string]any{"files": files}), nil)
				return nil
			}
			tfs, where := toolTemplates(cfg.Root)
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
				spec := ep
				spec.Name, spec.Capability = args[0], capability
				if spec.InputSchema, err = schemaFile(inSchema); err != nil {
					return err
				}
				if spec.OutputSchema, err = schemaFile(outSchema); err != nil {
					return err
				}
				if err := spec.checkEntrypoint(); err != nil {
					return err
				}
				specs = []scaffoldSpec{spec}
			default:
				a.set(envelope.NewBuilder(id).Fail(caperr.InvalidInput, "give NAME and --capability CAP, or --from-gaps REPORT.json", nil), nil)
				return nil
			}
			b := envelope.NewBuilder(id)
			if specs, err = a.unprovided(b, specs, alongside, fromGaps != ""); err != nil {
				return err
			}
			base := dir
			if base == "" {
				base = "tools"
				if len(cfg.ToolsDirs) > 0 {
					base = cfg.ToolsDirs[0]
				}
				base = cfg.Abs(base)
			}
			var created []map[string]any
			for _, s := range specs {
				folder := filepath.Join(base, s.Name)
				if dir != "" && len(specs) == 1 && fromGaps == "" {
					folder = dir
					if filepath.Base(dir) != s.Name {
						folder = filepath.Join(dir, s.Name)
					}
				}
				files, err := writeScaffold(tfs, folder, s, force)
				if err != nil {
					a.set(b.FailErr(err, map[string]any{"created": created}), nil)
					return nil
				}
				b.Info("scaffold", fmt.Sprintf("created %s for %s in %s (templates: %s)", s.Name, s.Capability, relTo(cfg.Root, folder), relTo(cfg.Root, where)))
				created = append(created, map[string]any{"name": s.Name, "capability": s.Capability, "dir": folder, "files": files})
			}
			if len(created) == 0 {
				msg := "no gaps that a new tool can fill"
				switch n := len(b.Feedback()); {
				case n == 1:
					msg += " (1 gap left to its plan: see the warning)"
				case n > 1:
					msg += fmt.Sprintf(" (%d gaps left to their plans: see the warnings)", n)
				}
				a.set(b.Succeed(msg, map[string]any{"created": []any{}}), nil)
				return nil
			}
			env := b.Succeed(fmt.Sprintf("created %s", caperr.Count(len(created), "tool")), map[string]any{"created": created})
			a.set(env, func(w io.Writer) {
				fmt.Fprintf(w, "✓ %s\n", env.Message)
				for _, c := range created {
					fmt.Fprintf(w, "  %s (%s) in %s\n", c["name"], c["capability"], relTo(cfg.Root, c["dir"].(string)))
				}
				fmt.Fprintln(w, nextAfterScaffold(specs[0]))
			})
			return nil
		},
	}
	c.Flags().StringVar(&capability, "capability", "", "the capability the tool provides (domain.action)")
	c.Flags().StringVar(&dir, "dir", "", "where to create the tool (default: the first tools_dirs entry)")
	c.Flags().StringVar(&fromGaps, "from-gaps", "", "a gap report (or the envelope of plan check --output json): one tool per fillable gap")
	c.Flags().BoolVar(&force, "force", false, "overwrite an existing tool folder")
	c.Flags().BoolVar(&alongside, "alongside", false, "create a tool for a capability another tool already provides (the new one may then take it from that tool for every plan of the project: capflow tools resolve CAP shows the order)")
	c.Flags().StringVar(&inSchema, "input-schema", "", "a JSON Schema file (YAML or JSON) for the tool's inputs (default: an empty object)")
	c.Flags().StringVar(&outSchema, "output-schema", "", "a JSON Schema file (YAML or JSON) for the tool's data (default: an empty object)")
	c.Flags().StringVar(&ep.Entrypoint, "entrypoint", "command", "command (a run.sh to fill in), http (an endpoint: --url) or builtin (one of capflow's: --builtin)")
	c.Flags().StringVar(&ep.URL, "url", "", "the endpoint an http tool's inputs are POSTed to")
	c.Flags().StringVar(&ep.Builtin, "builtin", "", "the builtin a builtin tool runs (default: the capability's name, when a builtin has it)")
	c.Flags().BoolVar(&writeTmpl, "write-templates", false, "write the built-in tool templates to templates/tool/ in the project, to edit (scaffold then uses them)")
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
		if g.Reason != gap.NoCapabilityMatch && g.Reason != gap.SchemaIncompatible {
			continue
		}
		// A sub-plan step's gap has no capability: unprovided says so.
		if g.MissingCapability != "" && (g.ProposedToolName == "" || seen[g.ProposedToolName]) {
			continue
		}
		seen[g.ProposedToolName] = true
		out = append(out, scaffoldSpec{Name: g.ProposedToolName, Capability: g.MissingCapability,
			Description: "Provides " + g.MissingCapability + " (scaffolded from a gap in step " + g.StepID + ")",
			InputSchema: g.ProposedInputSchema, OutputSchema: g.ProposedOutputSchema, Step: g.StepID, Why: g.ReasonMessage})
	}
	return out, nil
}

type gapEntry struct {
	StepID               string         `json:"step_id"`
	MissingCapability    string         `json:"missing_capability"`
	Reason               string         `json:"reason"`
	ReasonMessage        string         `json:"reason_message"`
	ProposedToolName     string         `json:"proposed_tool_name"`
	ProposedInputSchema  map[string]any `json:"proposed_input_schema"`
	ProposedOutputSchema map[string]any `json:"proposed_output_schema"`
}

func writeScaffold(tfs fs.FS, folder string, s scaffoldSpec, force bool) ([]string, error) {
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
	if s.Entrypoint == "" {
		s.Entrypoint = "command"
	}
	names, err := renderScaffold(tfs, folder, s)
	if err != nil {
		return names, err
	}
	// The skeleton must validate: check it now rather than leave a trap.
	data, _ := os.ReadFile(filepath.Join(folder, "tool.yaml"))
	m, probs := manifest.Parse(filepath.Join(folder, "tool.yaml"), folder, data)
	if len(probs) > 0 {
		return nil, caperr.Wrap(caperr.InvalidInput, probs, "the generated manifest does not validate (check the schemas)")
	}
	if m.Entrypoint.Type != s.Entrypoint {
		return nil, caperr.New(caperr.InvalidInput, "the project's %s made a %s tool, not a %s one: its tool.yaml.tmpl does not use .Entrypoint (compare it with `capflow tools scaffold --write-templates` in an empty folder)", TemplatesDir, m.Entrypoint.Type, s.Entrypoint)
	}
	return names, nil
}
