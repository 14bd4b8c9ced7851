package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/yamldoc"
)

func (a *App) toolsCommand() *cobra.Command {
	c := &cobra.Command{Use: "tools", Short: "Validate, list, resolve, scaffold and run tools", RunE: a.groupRun}
	c.AddCommand(a.toolsValidate(), a.toolsList(), a.toolsResolve(), a.toolsShow(), a.toolsScaffold(), a.toolsRun(), a.toolsImportMCP())
	return c
}

// ToolInfo is one tool in command output.
type ToolInfo struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Source       string   `json:"source"`
	Path         string   `json:"path"`
	Capabilities []string `json:"capabilities"`
	Description  string   `json:"description,omitempty"`
	Entrypoint   string   `json:"entrypoint,omitempty"`
	Stability    string   `json:"stability,omitempty"`
	Priority     int      `json:"priority"`
	Digest       string   `json:"digest,omitempty"`
}

func toolInfo(m *manifest.Manifest) ToolInfo {
	return ToolInfo{Name: m.Name, Version: m.Version, Source: m.Source, Path: m.File, Capabilities: m.Capabilities,
		Description: m.Description, Entrypoint: m.Entrypoint.Type, Stability: m.Stability, Priority: m.Priority, Digest: m.Digest}
}

func (a *App) toolsValidate() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [PATH...]",
		Short: "Validate every manifest the project sees, or the tool.yaml/kit.yaml files under PATHs",
		RunE: func(cmd *cobra.Command, args []string) error {
			b := envelope.NewBuilder("capflow-tools-validate")
			var tools []*manifest.Manifest
			var probs caperr.Problems
			var warnings []string
			root := "."
			if len(args) > 0 {
				root, _ = os.Getwd()
				tools, probs = validatePaths(root, args)
			} else {
				cfg, reg, err := a.loadRegistry()
				if err != nil {
					if !asProblems(err, &probs) {
						return err
					}
				} else {
					root, tools, probs, warnings = cfg.Root, reg.Tools, reg.Problems, reg.Warnings
				}
			}
			warnings = append(warnings, missingDescriptions(root, tools)...)
			for _, w := range warnings {
				b.Warn("registry", w)
			}
			infos := []ToolInfo{}
			for _, m := range tools {
				infos = append(infos, toolInfo(m))
			}
			data := map[string]any{"tools": infos, "problems": problemList(probs)}
			var env envelope.Envelope
			if len(probs) == 0 {
				b.Info("validate", fmt.Sprintf("%d manifests valid", len(infos)))
				env = b.Succeed(fmt.Sprintf("%d tools valid", len(infos)), data)
			} else {
				for _, p := range probs {
					b.Error("validate", p.Error(), string(p.Code))
				}
				env = b.Fail(probs[0].Code, fmt.Sprintf("%s in %s; %s valid", caperr.Count(len(probs), "problem"), caperr.Count(countFiles(probs), "file"), caperr.Count(len(infos), "tool")), data)
			}
			a.set(env, func(w io.Writer) {
				bySource := map[string]int{}
				for _, t := range infos {
					bySource[t.Source]++
				}
				var parts []string
				for s, n := range bySource {
					parts = append(parts, fmt.Sprintf("%s: %d", s, n))
				}
				sort.Strings(parts)
				mark := "✓"
				if len(probs) > 0 {
					mark = "✗"
				}
				fmt.Fprintf(w, "%s %s (%s)\n", mark, env.Message, strings.Join(parts, ", "))
				for _, wn := range warnings {
					fmt.Fprintf(w, "  ! %s\n", wn)
				}
				printProblems(w, root, problemList(probs))
			})
			return nil
		},
	}
}

func countFiles(ps caperr.Problems) int {
	files := map[string]bool{}
	for _, p := range ps {
		files[p.File] = true
	}
	return len(files)
}

// validatePaths validates explicit files, or every tool.yaml and
// kit.yaml below the given folders, including duplicate names per folder.
func validatePaths(root string, paths []string) ([]*manifest.Manifest, caperr.Problems) {
	var tools []*manifest.Manifest
	var probs caperr.Problems
	byName := map[string]map[string]*manifest.Manifest{}
	handle := func(p string) {
		disp := relTo(root, p)
		data, err := yamldoc.ReadFile(p, disp)
		if err != nil {
			probs = append(probs, asError(err))
			return
		}
		if filepath.Base(p) == "kit.yaml" {
			_, ps := manifest.ParseKit(disp, data)
			probs = append(probs, ps...)
			return
		}
		m, ps := manifest.Parse(disp, filepath.Dir(p), data)
		probs = append(probs, ps...)
		if m == nil {
			return
		}
		m.Source = "path"
		group := filepath.Dir(filepath.Dir(p))
		if byName[group] == nil {
			byName[group] = map[string]*manifest.Manifest{}
		}
		if first := byName[group][m.Name]; first != nil {
			probs = append(probs, caperr.New(caperr.InvalidInput, "duplicate tool name %q (first defined in %s)", m.Name, first.File).At(disp, m.Line, 1, "name"))
			return
		}
		byName[group][m.Name] = m
		tools = append(tools, m)
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			probs = append(probs, caperr.Wrap(caperr.InvalidInput, err, "cannot read").At(p, 0, 0, ""))
			continue
		}
		if !st.IsDir() {
			abs, _ := filepath.Abs(p)
			handle(abs)
			continue
		}
		_ = filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (d.Name() == "tool.yaml" || d.Name() == "kit.yaml") {
				abs, _ := filepath.Abs(q)
				handle(abs)
			}
			return nil
		})
	}
	probs.Sort()
	return tools, probs
}

func (a *App) toolsList() *cobra.Command {
	var capability string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the registry: every tool the project sees",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			b := envelope.NewBuilder("capflow-tools-list")
			for _, w := range reg.Warnings {
				b.Warn("registry", w)
			}
			if len(reg.Problems) > 0 {
				b.Warn("registry", fmt.Sprintf("%s in %s, left out; run `capflow tools validate`", caperr.Count(len(reg.Problems), "manifest problem"), problemFiles(reg.Problems)))
			}
			infos := []ToolInfo{}
			var tools []*manifest.Manifest
			if capability != "" {
				tools = reg.Providers(capability)
			} else {
				tools = reg.Tools
			}
			for _, m := range tools {
				infos = append(infos, toolInfo(m))
			}
			b.Info("registry", reg.Summary())
			env := b.Succeed(fmt.Sprintf("%d tools", len(infos)), map[string]any{"tools": infos, "capabilities": reg.Capabilities()})
			a.set(env, func(w io.Writer) {
				var rows [][]string
				for _, t := range infos {
					rows = append(rows, []string{t.Name, t.Version, strings.Join(t.Capabilities, ","), t.Source, t.Entrypoint, t.Stability})
				}
				table(w, []string{"NAME", "VERSION", "CAPABILITIES", "SOURCE", "TYPE", "STABILITY"}, rows)
				for _, f := range env.Feedback {
					if f.Level != envelope.LevelInfo {
						fmt.Fprintf(w, "! %s\n", f.Message)
					}
				}
			})
			return nil
		},
	}
	c.Flags().StringVar(&capability, "capability", "", "only the tools that provide this capability, best first")
	return c
}

func (a *App) toolsResolve() *cobra.Command {
	var pin string
	c := &cobra.Command{
		Use:   "resolve CAPABILITY",
		Short: "Show the tool chosen for a capability and why each candidate won or lost",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			capab := args[0]
			b := envelope.NewBuilder("capflow-tools-resolve")
			if !manifest.ValidCapability(capab) {
				a.set(b.Fail(caperr.InvalidInput, fmt.Sprintf("%q is not a capability (domain.action)", capab), nil), nil)
				return nil
			}
			res, rerr := reg.Resolve(capab, pin)
			data := map[string]any{"capability": capab, "chosen": nil, "candidates": res.Candidates}
			if res.Chosen != nil {
				data["chosen"] = map[string]any{"name": res.Chosen.Name, "version": res.Chosen.Version, "source": res.Chosen.Source}
			}
			if res.Candidates == nil {
				data["candidates"] = []registry.Candidate{}
			}
			var env envelope.Envelope
			if rerr != nil {
				data["similar"] = reg.Similar(capab)
				env = b.Fail(caperr.CodeOf(rerr), rerr.Error(), data)
			} else {
				b.Info("resolve", fmt.Sprintf("%d candidate(s) for %s; %s", len(res.Candidates), capab, res.Chosen.Reason))
				env = b.Succeed(fmt.Sprintf("%s → %s@%s (%s)", capab, res.Chosen.Name, res.Chosen.Version, res.Chosen.Source), data)
			}
			a.set(env, func(w io.Writer) {
				if rerr != nil {
					fmt.Fprintf(w, "✗ %s\n", rerr.Error())
				} else {
					fmt.Fprintf(w, "✓ %s\n", env.Message)
				}
				if len(res.Candidates) > 0 {
					var rows [][]string
					for _, c := range res.Candidates {
						mark := " "
						if c.Chosen {
							mark = "→"
						}
						rows = append(rows, []string{mark, fmt.Sprint(c.Rank), c.Name + "@" + c.Version, c.Source, c.Reason})
					}
					table(w, []string{"", "RANK", "TOOL", "SOURCE", "WHY"}, rows)
				}
			})
			return nil
		},
	}
	c.Flags().StringVar(&pin, "pin", "", "restrict to a tool: name or name@version-prefix")
	return c
}

func (a *App) toolsRun() *cobra.Command {
	var inputs []string
	var inputsFile string
	c := &cobra.Command{
		Use:   "run TOOL|CAPABILITY",
		Short: "Run one tool locally, without Temporal, and print its envelope",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			m := findTool(reg, args[0])
			if m == nil {
				msg := fmt.Sprintf("no tool or capability named %q%s%s", args[0], toolPhrase(reg, args[0]), reg.ProblemsNote())
				a.set(envelope.NewBuilder("capflow-tools-run").Fail(caperr.ToolNotFound, msg, nil), nil)
				return nil
			}
			props, _ := m.InputSchema["properties"].(map[string]any)
			in, err := parseInputs(inputs, inputsFile, props)
			if err != nil {
				return err
			}
			ctx, stop := context.WithCancel(a.ctx)
			defer stop()
			if m.Timeouts.StartToClose > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, m.Timeouts.StartToClose.D())
				defer cancel()
			}
			pol, err := a.loadPolicy()
			if err != nil {
				return err
			}
			wd, _ := os.MkdirTemp("", "capflow-tool-")
			defer os.RemoveAll(wd)
			// A short grace: capflow answers a signal within 2 s.
			proj, err := a.loadProject()
			if err != nil {
				return err
			}
			mcp := proj.MCP(Version)
			defer mcp.Close()
			runner := &toolrun.Runner{Logger: a.log.Named("toolrun"), Grace: time.Second, MCP: mcp, Protected: proj.Config.Protected(), Private: proj.Config.Private()}
			began := envelope.Now()
			env := runner.Run(ctx, toolrun.Request{Manifest: m, Inputs: in, RunID: "local", StepID: m.Name, Attempt: 1,
				Root: cfg.Root, Workdir: wd, Secrets: toolrun.SecretsFromEnv(m, os.LookupEnv), Sandbox: pol.Sandbox, Net: proj.Egress(pol),
				OnFeedback: func(f envelope.Feedback) {
					if !a.jsonOutput() {
						fmt.Fprintf(a.Stderr, "  [%s] %s: %s\n", f.Level, f.Phase, f.Message)
					}
				}})
			if !env.Success && env.ExitCode == 0 {
				env.ExitCode = 1
			}
			if env.Success {
				env.Feedback = toolPhases(m, began, env.Feedback)
			}
			// The envelope keeps the tool's own exit status; capflow exits
			// by its table (a failed tool: 1, cancelled: 5, ...).
			exit := 0
			if !env.Success {
				exit = exitFor(env)
			}
			// What the tool returned, under the headline (a person trying
			// a tool wants its answer, not only "done").
			a.result = &result{env: env, exit: &exit, pretty: func(w io.Writer) { prettyEnvelope(w, env); prettyData(w, env.Data) }}
			return nil
		},
	}
	c.Flags().StringArrayVar(&inputs, "input", nil, "an input as NAME=VALUE (repeatable)")
	c.Flags().StringVar(&inputsFile, "inputs-file", "", "a YAML or JSON file of inputs")
	return c
}

// findTool looks a tool up by name (with an optional @version prefix), or
// by a capability it provides (the tool the registry would choose).

// problemFiles names the files problems are in: the first three, then how
// many more (a new user was told only how many problems there were).
func problemFiles(probs caperr.Problems) string {
	var files []string
	for _, p := range probs {
		if p.File != "" && !slices.Contains(files, p.File) {
			files = append(files, p.File)
		}
	}
	if len(files) > 3 {
		return fmt.Sprintf("%s and %d more files", strings.Join(files[:3], ", "), len(files)-3)
	}
	if len(files) == 0 {
		return "the project's tools"
	}
	return strings.Join(files, ", ")
}
