package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/wire"
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
	// Folder is where it is written.
	Folder string
	// Gap is the gap a spec came from (--from-gaps; nil: a named tool).
	Gap *wire.Gap
}

// scaffoldFlags are tools scaffold's flags.
type scaffoldFlags struct {
	capability, dir, fromGaps, inSchema, outSchema string
	steps                                          []string
	force, writeTmpl, alongside                    bool
	ep                                             scaffoldSpec
}

func (a *App) toolsScaffold() *cobra.Command {
	f := scaffoldFlags{ep: scaffoldSpec{Entrypoint: "command"}}
	c := &cobra.Command{
		Use:   "scaffold [NAME] --capability CAP [--input-schema FILE] [--output-schema FILE] [--entrypoint command|http|builtin] | --from-gaps REPORT.json [--step ID] | --write-templates",
		Short: "Create a working tool skeleton (manifest + executable) that validates and runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := "capflow-tools-scaffold"
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if f.writeTmpl {
				files, err := writeTemplates(cfg.Root)
				if err != nil {
					return err
				}
				a.set(envelope.NewBuilder(id).Succeed(fmt.Sprintf("wrote the tool templates to %s: edit them; tools scaffold uses them from now on", relTo(cfg.Root, filepath.Join(cfg.Root, TemplatesDir))),
					map[string]any{"files": files}), nil)
				return nil
			}
			specs, err := f.specs(args)
			if err != nil {
				return err
			}
			f.place(cfg, specs)
			b := envelope.NewBuilder(id)
			if specs, err = a.unprovided(b, specs, f, cfg); err != nil {
				return err
			}
			a.createScaffolds(b, cfg, specs, f.force)
			return nil
		},
	}
	c.Flags().StringVar(&f.capability, "capability", "", "the capability the tool provides (domain.action)")
	c.Flags().StringVar(&f.dir, "dir", "", "where to create the tool (default: the first tools_dirs entry)")
	c.Flags().StringVar(&f.fromGaps, "from-gaps", "", "a gap report (or the envelope of plan check --output json): one tool per fillable gap")
	c.Flags().StringSliceVar(&f.steps, "step", nil, "with --from-gaps: only the gaps of these steps (ID, repeatable)")
	c.Flags().BoolVar(&f.force, "force", false, "overwrite an existing tool folder")
	c.Flags().BoolVar(&f.alongside, "alongside", false, "create a tool for a capability another tool already provides (it then serves the capability to every plan of the project wherever it ranks first: capflow tools resolve CAP shows the order)")
	c.Flags().StringVar(&f.inSchema, "input-schema", "", "a JSON Schema file (YAML or JSON) for the tool's inputs (default: an empty object)")
	c.Flags().StringVar(&f.outSchema, "output-schema", "", "a JSON Schema file (YAML or JSON) for the tool's data (default: an empty object)")
	c.Flags().StringVar(&f.ep.Entrypoint, "entrypoint", "command", "command (a run.sh to fill in), http (an endpoint: --url) or builtin (one of capflow's: --builtin)")
	c.Flags().StringVar(&f.ep.URL, "url", "", "the endpoint an http tool's inputs are POSTed to")
	c.Flags().StringVar(&f.ep.Builtin, "builtin", "", "the builtin a builtin tool runs (default: the capability's name, when a builtin has it)")
	c.Flags().BoolVar(&f.writeTmpl, "write-templates", false, "write the built-in tool templates to templates/tool/ in the project, to edit (scaffold then uses them)")
	return c
}

// specs are the tools the flags ask for: one named, or a report's gaps.
func (f *scaffoldFlags) specs(args []string) ([]scaffoldSpec, error) {
	switch {
	case f.fromGaps != "":
		if len(args) > 0 || f.capability != "" {
			return nil, caperr.New(caperr.InvalidInput, "--from-gaps takes no NAME or --capability")
		}
		return specsFromGaps(f.fromGaps, f.steps)
	case len(f.steps) > 0:
		return nil, caperr.New(caperr.InvalidInput, "--step goes with --from-gaps")
	case len(args) == 1 && f.capability != "":
		spec := f.ep
		spec.Name, spec.Capability = args[0], f.capability
		var err error
		if spec.InputSchema, err = schemaFile(f.inSchema); err != nil {
			return nil, err
		}
		if spec.OutputSchema, err = schemaFile(f.outSchema); err != nil {
			return nil, err
		}
		if err := spec.checkEntrypoint(); err != nil {
			return nil, err
		}
		return []scaffoldSpec{spec}, nil
	}
	return nil, caperr.New(caperr.InvalidInput, "give NAME and --capability CAP, or --from-gaps REPORT.json")
}

// place sets each spec's folder: NAME under --dir (or --dir itself when
// it ends in NAME) for one named tool, else under the first tools_dirs
// entry.
func (f *scaffoldFlags) place(cfg *config.Config, specs []scaffoldSpec) {
	base := f.dir
	if base == "" {
		base = "tools"
		if len(cfg.ToolsDirs) > 0 {
			base = cfg.ToolsDirs[0]
		}
		base = cfg.Abs(base)
	}
	for i := range specs {
		specs[i].Folder = filepath.Join(base, specs[i].Name)
		if f.dir != "" && len(specs) == 1 && f.fromGaps == "" && filepath.Base(f.dir) == specs[i].Name {
			specs[i].Folder = f.dir
		}
		if abs, err := filepath.Abs(specs[i].Folder); err == nil {
			specs[i].Folder = abs // compared with the tools' folders
		}
	}
}

// createScaffolds writes each spec's tool and sets the command's result.
func (a *App) createScaffolds(b *envelope.Builder, cfg *config.Config, specs []scaffoldSpec, force bool) {
	tfs, where := toolTemplates(cfg.Root)
	var created []map[string]any
	for _, s := range specs {
		files, err := writeScaffold(tfs, s.Folder, s, force)
		if err != nil {
			a.set(b.FailErr(err, map[string]any{"created": created}), nil)
			return
		}
		b.Info("scaffold", fmt.Sprintf("created %s for %s in %s (templates: %s)", s.Name, s.Capability, relTo(cfg.Root, s.Folder), relTo(cfg.Root, where)))
		created = append(created, map[string]any{"name": s.Name, "capability": s.Capability, "dir": s.Folder, "files": files})
	}
	left := 0
	for _, f := range b.Feedback() {
		if f.Level == envelope.LevelWarning {
			left++
		}
	}
	if len(created) == 0 {
		msg := "no gaps that a new tool can fill"
		switch {
		case left == 1:
			msg += " (1 gap left to its plan: see the warning)"
		case left > 1:
			msg += fmt.Sprintf(" (%d gaps left to their plans: see the warnings)", left)
		}
		a.set(b.Succeed(msg, map[string]any{"created": []any{}}), nil)
		return
	}
	env := b.Succeed(fmt.Sprintf("created %s", caperr.Count(len(created), "tool")), map[string]any{"created": created})
	a.set(env, func(w io.Writer) {
		fmt.Fprintf(w, "✓ %s\n", env.Message)
		for _, c := range created {
			fmt.Fprintf(w, "  %s (%s) in %s\n", c["name"], c["capability"], relTo(cfg.Root, c["dir"].(string)))
		}
		for _, f := range env.Feedback {
			if f.Level == envelope.LevelWarning {
				fmt.Fprintf(w, "  [warning] %s\n", printable(f.Message))
			}
		}
		fmt.Fprintln(w, nextAfterScaffold(specs[0], a.projectDir))
	})
}

// specsFromGaps reads a gap report, bare or inside a plan check envelope:
// a spec a gap, of the steps named (all when none are).
func specsFromGaps(path string, steps []string) ([]scaffoldSpec, error) {
	b, err := yamldoc.ReadFile(path, path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Gaps []wire.Gap `json:"gaps"`
		Data *struct {
			Gaps []wire.Gap `json:"gaps"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "%s is not a JSON gap report", path)
	}
	gaps := doc.Gaps
	if doc.Data != nil && len(doc.Data.Gaps) > 0 {
		gaps = doc.Data.Gaps
	}
	for _, id := range steps {
		if !slices.ContainsFunc(gaps, func(g wire.Gap) bool { return g.StepID == id }) {
			return nil, caperr.New(caperr.InvalidInput, "--step %s: %s has no gap of that step", id, path)
		}
	}
	seen := map[string]bool{}
	var out []scaffoldSpec
	for i, g := range gaps {
		if (g.Reason != gap.NoCapabilityMatch && g.Reason != gap.SchemaIncompatible) || (len(steps) > 0 && !slices.Contains(steps, g.StepID)) {
			continue
		}
		// A sub-plan step's gap has no capability: unprovided says so.
		if g.MissingCapability != "" && (g.ProposedToolName == "" || seen[g.ProposedToolName]) {
			continue
		}
		seen[g.ProposedToolName] = true
		out = append(out, scaffoldSpec{Name: g.ProposedToolName, Capability: g.MissingCapability,
			Description: "Provides " + g.MissingCapability + " (scaffolded from a gap in step " + g.StepID + ")",
			InputSchema: g.ProposedInputSchema, OutputSchema: g.ProposedOutputSchema, Gap: &gaps[i]})
	}
	return out, nil
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
