// Package cli implements the capflow command line (docs/cli.md).
// Every command produces one envelope: printed as JSON with --output json,
// rendered for people otherwise; the exit code follows the contract table.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/logging"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/telemetry"
)

// SoftMemoryLimit is the CLI's Go memory limit unless GOMEMLIMIT is set.
const SoftMemoryLimit = 384 << 20

// Version is set at build time with -ldflags.
var Version = "dev"

// App is one invocation of the CLI.
type App struct {
	// phases are what a command went through (agent: planning, gap
	// check, ...), its envelope's first feedback.
	phases []envelope.Feedback
	// attempts say where a running run's steps' attempts are (status).
	attempts []string
	// localCheck is run's own check of its plan (its status), asked when
	// the worker refused the plan.
	localCheck func() string
	Stdout     io.Writer
	Stderr     io.Writer

	projectDir string
	configFile string
	output     string
	outputPath string
	// outputPathBad: --output-path was refused; nothing is written to it.
	outputPathBad bool
	// verbose: live output includes the tools' stderr lines.
	verbose bool
	// progress: live lines on stderr even with JSON output (the MCP
	// server turns them into progress notifications).
	progress bool
	flags    map[string]*pflag.Flag

	log hclog.Logger
	// began is when the command started: its envelope's duration counts
	// from it, not from whichever builder made the envelope (a run's,
	// made once the run ended, said 0 ms).
	began  time.Time
	result *result
	proj   *project.Project
	// ctx ends on SIGINT or SIGTERM; every command's work derives from it.
	ctx context.Context
	// tracing exports the client's spans (telemetry.otlp_endpoint).
	tracing *telemetry.Tracing
	// emitted guards the one envelope a run prints (the normal one, or
	// the safety net's on a signal the command did not answer in time).
	emitted sync.Once
}

// result is what a command hands back for printing.
type result struct {
	env    envelope.Envelope
	pretty func(w io.Writer)
	// exit overrides the envelope's exit code as the process's status:
	// a tool's own exit status (kept in its envelope) is not capflow's.
	exit *int
}

// SignalGrace is how long a command may take to wind down after SIGINT or
// SIGTERM before the safety net prints a CANCELLED envelope and exits 5.
const SignalGrace = 1500 * time.Millisecond

// Process runs the CLI as the capflow process: like Main, and on SIGINT or
// SIGTERM a command that has not finished within SignalGrace is abandoned
// with a CANCELLED envelope (exit 5), so capflow always answers a signal
// within 2 s whatever a tool or server is doing.
func Process(args []string, stdout, stderr io.Writer) int {
	// SIGQUIT too: Go's default would print every goroutine's stack.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	a := &App{Stdout: stdout, Stderr: stderr, ctx: ctx}
	finished := make(chan struct{})
	go func() {
		select {
		case <-finished:
			return
		case <-ctx.Done():
		}
		select {
		case <-finished:
		case <-time.After(SignalGrace):
			// A throwaway command tree names the command: nothing shared
			// with the one still running, and no cost unless a signal came.
			id := commandID((&App{}).rootCommand(), args)
			env := envelope.NewBuilder(id).Fail(caperr.Cancelled, "cancelled by a signal", nil)
			os.Exit(a.emit(&result{env: env}))
		}
	}()
	code := a.main(args)
	close(finished)
	return code
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) (code int) {
	return (&App{Stdout: stdout, Stderr: stderr, ctx: context.Background()}).main(args)
}

func (a *App) main(args []string) (code int) {
	a.began = envelope.Now()
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit: parsing a plan near the size limit stays well under
		// 512 MB instead of letting garbage double the heap.
		debug.SetMemoryLimit(SoftMemoryLimit)
	}
	a.log = logging.New("capflow", a.Stderr, hclog.Warn)
	defer func() {
		if err := a.tracing.Shutdown(2 * time.Second); err != nil {
			a.log.Warn("telemetry", "error", err.Error())
		}
	}()
	defer func() {
		// Never a Go stack trace for any input: a panic is a bug, reported
		// as INTERNAL_ERROR in the envelope.
		if p := recover(); p != nil {
			a.log.Error("internal error", "panic", fmt.Sprint(p))
			env := envelope.NewBuilder("capflow").Fail(caperr.InternalError, fmt.Sprintf("internal error: %v", p), nil)
			code = a.emit(&result{env: env})
		}
	}()
	// The output format is known before cobra parses anything, so even an
	// unknown command or a bad flag answers with one envelope in json mode.
	root := a.rootCommand() // binding the flags resets a.output to its default
	a.output = outputFlag(args)
	root.SetArgs(args)
	// Before cobra looks for the command: it adds --help only once it has
	// found one, and till then takes the word after --help for its value
	// ("capflow --help --output json" was the unknown command "json").
	root.InitDefaultHelpFlag()
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	var helped *cobra.Command
	if a.jsonOutput() {
		// A shell script is not an envelope: no completion command in json mode.
		root.CompletionOptions.DisableDefaultCmd = true
		root.SetHelpFunc(func(c *cobra.Command, _ []string) { helped = c })
		root.SetVersionTemplate(`{{/* json output: the envelope says it */}}`)
	}
	err := root.Execute()
	if err != nil {
		// Flag and argument errors from cobra: invalid input, on one line.
		msg := cobraSuggestion.ReplaceAllString(err.Error(), ` (did you mean "$1"?)`)
		if m := cobraUnknown.FindStringSubmatch(msg); m != nil {
			msg += nested(root, m[1]) // "check" is "plan check"
		}
		if c, _, ferr := root.Find(args); ferr == nil && cobraArgCount.MatchString(msg) {
			// cobra says how many, not of what: the usage line does.
			msg = fmt.Sprintf("%s %s (usage: %s)", c.CommandPath(), msg, c.UseLine())
		}
		b := envelope.NewBuilder(commandID(root, args))
		b.Error("args", msg, "")
		env := b.Fail(caperr.InvalidInput, msg+" (see --help)", nil)
		return a.emit(&result{env: env})
	}
	if a.result == nil && a.jsonOutput() {
		// --help, --version: still one envelope.
		if helped == nil {
			helped = root
		}
		id := toolID(helped)
		if helped == root && containsFlag(args, "--version") {
			a.set(envelope.NewBuilder(id).Succeed("capflow "+Version, map[string]any{"version": Version}), nil)
		} else {
			a.set(envelope.NewBuilder(id).Succeed("usage of "+helped.CommandPath(), map[string]any{"usage": helped.UsageString()}), nil)
		}
	}
	if a.result == nil {
		return 0 // help or version printed by cobra
	}
	return a.emit(a.result)
}

// outputFlag finds --output before cobra parses the command line.
func outputFlag(args []string) string {
	out := ""
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--output="); ok {
			out = v
		} else if a == "--output" && i+1 < len(args) {
			out = args[i+1]
		}
	}
	return out
}

func containsFlag(args []string, names ...string) bool {
	for _, a := range args {
		for _, n := range names {
			if a == n {
				return true
			}
		}
	}
	return false
}

// toolID is a command's envelope id: its path in kebab-case, like every
// tool's (capflow-plan-check).
func toolID(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}

func commandID(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != nil {
		return toolID(c)
	}
	return "capflow"
}

func (a *App) jsonOutput() bool {
	return a.output == "json" || (a.output == "" && os.Getenv("TOOLS_OUTPUT_JSON") == "1")
}

func (a *App) set(env envelope.Envelope, pretty func(io.Writer)) {
	if len(a.phases) > 0 {
		// What the command went through comes first, then its own words.
		env.Feedback = append(a.phases, env.Feedback...)
		a.phases = nil
	}
	if len(env.Feedback) == 0 {
		// Every envelope says at least what it did (contract: feedback per phase).
		env.Feedback = []envelope.Feedback{{Phase: "result", Level: envelope.LevelInfo, Message: env.Message, Timestamp: env.Timestamp}}
	}
	if !a.began.IsZero() {
		env.DurationMS = envelope.Now().Sub(a.began).Milliseconds()
	}
	a.result = &result{env: env, pretty: pretty}
}

func (a *App) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "capflow",
		Short:         "Run capability plans durably on Temporal",
		Long:          "capflow resolves capability plans to tools, checks gaps and policy before anything runs,\nand runs ready plans as durable Temporal workflows.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       Version,
	}
	// --version without cobra's -v shorthand: -v is --verbose (run,
	// status --follow), as in most tools.
	root.Flags().Bool("version", false, "print the version")
	root.SetVersionTemplate("capflow {{.Version}}\n") // as `capflow version` says it
	pf := root.PersistentFlags()
	pf.StringVar(&a.projectDir, "project", "", "project folder (default: the nearest folder with capflow.yaml, from the current one up)")
	pf.StringVar(&a.configFile, "config", "", "config file (default: <project>/capflow.yaml)")
	pf.StringVar(&a.output, "output", "", "output format: pretty or json (TOOLS_OUTPUT_JSON=1 means json)")
	pf.StringVar(&a.outputPath, "output-path", "", "also write the result envelope to this file")
	pf.String("address", "", "Temporal frontend address (temporal.address)")
	pf.String("namespace", "", "Temporal namespace (temporal.namespace)")
	pf.String("task-queue", "", "Temporal task queue (temporal.task_queue)")
	a.flags = map[string]*pflag.Flag{
		"temporal.address":    pf.Lookup("address"),
		"temporal.namespace":  pf.Lookup("namespace"),
		"temporal.task_queue": pf.Lookup("task-queue"),
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if a.output != "" && a.output != "json" && a.output != "pretty" {
			return fmt.Errorf("--output must be pretty or json, not %q", a.output)
		}
		if a.outputPath != "" {
			if err := checkOutputPath(a.outputPath); err != nil {
				a.outputPathBad = true
				return caperr.New(caperr.InvalidInput, "%s %v", a.outputPath, err).At("", 0, 0, "--output-path")
			}
		}
		return nil
	}
	root.AddCommand(a.toolsCommand(), a.versionCommand())
	for _, c := range a.extraCommands() {
		root.AddCommand(c)
	}
	a.failuresAsEnvelopes(root)
	a.completion(root)
	return root
}

func (a *App) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := envelope.NewBuilder("capflow-version").Succeed("capflow "+Version, map[string]any{"version": Version})
			a.set(env, func(w io.Writer) { fmt.Fprintln(w, "capflow", Version) })
			return nil
		},
	}
}

// loadProject loads the project once per invocation (config only; the
// registry, policy and router are read when a command asks for them).
func (a *App) loadProject() (*project.Project, error) {
	if a.proj != nil {
		return a.proj, nil
	}
	dir := a.projectDir
	if dir == "" && a.configFile == "" {
		var err error
		if dir, err = a.findProject(); err != nil {
			return nil, err
		}
	}
	p, err := project.Load(project.Options{Dir: dir, ConfigFile: a.configFile, Flags: a.flags, Logger: a.log, LLMLog: a.Stderr})
	if err != nil {
		return nil, err
	}
	// A person's own check parses a plan's literal queries and templates
	// here, before a run (a worker leaves that to its evaluator children).
	p.Literals = builtin.CheckLiteral
	a.proj = p
	return p, nil
}

// loadConfig reads the effective configuration.
func (a *App) loadConfig() (*config.Config, error) {
	p, err := a.loadProject()
	if err != nil {
		return nil, err
	}
	return p.Config, nil
}

// loadRegistry loads config and registry; config problems come back as
// an error, manifest problems inside the registry.
func (a *App) loadRegistry() (*config.Config, *registry.Registry, error) {
	p, err := a.loadProject()
	if err != nil {
		return nil, nil, err
	}
	reg, err := p.Registry()
	if err != nil {
		return p.Config, nil, err
	}
	return p.Config, reg, nil
}

// loadPolicy reads the project's policy file (absent = allow all).
func (a *App) loadPolicy() (*policy.Policy, error) {
	p, err := a.loadProject()
	if err != nil {
		return nil, err
	}
	return p.Policy()
}

// failEnv turns an error into a failure envelope for command id.
func failEnv(id string, err error, data any) envelope.Envelope {
	b := envelope.NewBuilder(id)
	var probs caperr.Problems
	if asProblems(err, &probs) {
		for _, p := range probs {
			b.Error("validate", p.Error(), string(p.Code))
		}
		return b.Fail(probs[0].Code, fmt.Sprintf("%s in %s", caperr.Count(len(probs), "problem"), probs[0].File), problemsData(probs))
	}
	return b.FailErr(err, data)
}
