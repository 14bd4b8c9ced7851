package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
)

// A new project's files (capflow init). The task queue is the folder's
// own: a worker started in it and the runs started from it meet there,
// not on another project's worker.
const (
	initConfig = `# A capflow project: its tools, plans and runs live in this folder
# (every key has a default; docs/configuration.md in capflow has them all).
tools_dirs: [tools]   # a folder per tool, each with its tool.yaml: capflow tools scaffold NAME --capability CAP
active_kits: [core]   # shipped tools: core (files, HTTP, JSON, text); also runtime, media
temporal:
  task_queue: "%s"   # where this project's worker and its runs meet
`
	initPlan = `# capflow plan check plans/hello.yaml checks it (nothing runs);
# capflow run plans/hello.yaml --input who=you runs it.
name: hello
inputs:
  who: {type: string, default: world}
steps:
  - id: greet
    capability: text.render
    with: {template: "hello {{.who}}", values: {who: "${inputs.who}"}}
  - id: save
    capability: file.write
    with: {path: out/hello.txt, content: "${steps.greet.data.text}", overwrite: true}
`
	initIgnore = "# capflow's state and run folders\n.capflow/\n"
)

// queueOf is a task queue name for the project in dir: its folder's name.
func queueOf(dir string) string {
	q := kebab(filepath.Base(dir))
	if q == "" {
		return "project"
	}
	return q
}

func (a *App) initCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Make DIR (default: the current folder, or --project) a capflow project: capflow.yaml, tools/, an example plan",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := a.projectDir
			if len(args) == 1 {
				dir = args[0]
			}
			if dir == "" {
				dir = "."
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return caperr.Wrap(caperr.InvalidInput, err, "%s", dir)
			}
			files, err := initProject(abs)
			if err != nil {
				return err
			}
			b := envelope.NewBuilder("capflow-init")
			env := b.Succeed("created a capflow project in "+abs, map[string]any{"dir": abs, "files": files, "task_queue": queueOf(abs)})
			a.set(env, func(w io.Writer) {
				fmt.Fprintf(w, "✓ %s: %s\n", env.Message, strings.Join(files, ", "))
				fmt.Fprintf(w, "next, in %s:\n", abs)
				fmt.Fprintln(w, "  capflow plan check plans/hello.yaml     checks the plan against this project's tools; nothing runs")
				fmt.Fprintln(w, "  capflow-worker &                         this project's worker (a Temporal server first: temporal server start-dev)")
				fmt.Fprintln(w, "  capflow run plans/hello.yaml             runs it on that worker; out/hello.txt is its result")
			})
			return nil
		},
	}
}

// initProject writes a new project's files in dir (made when missing),
// each beneath it; an existing capflow.yaml is refused, an existing plan
// or .gitignore kept. It returns what it wrote.
func initProject(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot make %s", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot open %s", dir)
	}
	defer r.Close()
	switch _, err := r.Lstat(config.FileName); {
	case err == nil:
		return nil, caperr.New(caperr.InvalidInput, "%s is already a capflow project (it has %s): nothing was written", dir, config.FileName)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot look into %s", dir)
	}
	var wrote []string
	for _, f := range []struct{ name, text string }{
		{config.FileName, fmt.Sprintf(initConfig, queueOf(dir))},
		{filepath.Join("plans", "hello.yaml"), initPlan},
		{".gitignore", initIgnore},
	} {
		if _, err := r.Lstat(f.name); err == nil {
			continue // the user's own
		} else if !errors.Is(err, fs.ErrNotExist) {
			return wrote, caperr.Wrap(caperr.InvalidInput, err, "cannot look into %s", dir)
		}
		if err := beneath.Create(r, f.name, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, f.text); return err }); err != nil {
			return wrote, caperr.Wrap(caperr.InvalidInput, err, "cannot write %s in %s", f.name, dir)
		}
		wrote = append(wrote, filepath.ToSlash(f.name))
	}
	if err := r.MkdirAll("tools", 0o755); err != nil {
		return wrote, caperr.Wrap(caperr.InvalidInput, err, "cannot make tools/ in %s", dir)
	}
	return append(wrote, "tools/"), nil
}
