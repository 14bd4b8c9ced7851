// Package project loads a capflow project: its configuration, tool
// registry, policy and request router, and assembles the preflight check.
// The CLI, the worker and the activities all go through it, so a plan is
// checked the same way everywhere (the same tools, the same policy file
// named the same way).
package project

import (
	"context"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/depcheck"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/mcpclient"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/planfile"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/router"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/kits"
)

// Options of Load. Every field may be left zero.
type Options struct {
	// Dir is the project folder; "" means the current directory.
	Dir string
	// ConfigFile is an explicit config file; "" means <Dir>/capflow.yaml.
	ConfigFile string
	// Flags maps config keys to command-line flags that override them.
	Flags map[string]*pflag.Flag
	// Logger is named per subsystem below it; nil discards logs.
	Logger hclog.Logger
	// LLMLog receives the LLM fallback's call log (LLM_LOG=1); nil: none.
	LLMLog io.Writer
}

// Project is a loaded configuration and the way to everything it names.
// Registry, Policy and Router read their files on each call (the registry
// through its cache), so edits apply without a restart.
type Project struct {
	Config *config.Config
	log    hclog.Logger
	llmLog io.Writer
	// The registry and the policy last loaded, answered again while their
	// files are as they were (a worker loads both for every run).
	registry registry.Memo
	policy   policyMemo
	services services
	// Literals, when set, checks builtins' inputs written in a plan as
	// they are (preflight.Request.Literals): the CLI's, not a worker's.
	Literals func(builtin string, with map[string]any) (field string, err error)
}

// Load reads the configuration.
func Load(opts Options) (*Project, error) {
	cfg, err := config.Load(config.Options{Project: opts.Dir, File: opts.ConfigFile, Flags: opts.Flags})
	if err != nil {
		return nil, err
	}
	return New(cfg, opts.Logger, opts.LLMLog), nil
}

// New wraps an already loaded configuration.
func New(cfg *config.Config, log hclog.Logger, llmLog io.Writer) *Project {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Project{Config: cfg, log: log, llmLog: llmLog}
}

// Root is the project folder.
func (p *Project) Root() string { return p.Config.Root }

// Rel shows a path relative to the project root when it is inside it.
func (p *Project) Rel(path string) string {
	if r, err := filepath.Rel(p.Config.Root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// RegistryOptions says where the project's tools are.
func (p *Project) RegistryOptions() registry.Options {
	cfg := p.Config
	display := config.FileName
	if cfg.File != "" {
		display = p.Rel(cfg.File)
	}
	return registry.Options{
		Root: cfg.Root, KitsDirs: cfg.KitsDirs, ToolsDirs: cfg.ToolsDirs, ActiveKits: cfg.ActiveKits,
		Order: cfg.ToolResolutionOrder, StateDir: cfg.Abs(cfg.StateDir), Builtin: kits.Builtin(),
		ConfigFile: display, Logger: p.log.Named("registry"), Protected: cfg.Protected(), Memo: &p.registry,
	}
}

// Artifacts opens the project's artifact store (artifacts.url;
// docs/artifacts.md): CONFIG_ERROR when the URL is not allowed.
func (p *Project) Artifacts(ctx context.Context) (*artifacts.Store, error) {
	return artifacts.Open(ctx, artifacts.Options{URL: p.Config.Artifacts.URL, StateDir: p.Config.Abs(p.Config.StateDir)})
}

// MCP is a pool of sessions to the project's MCP servers (docs/mcp.md);
// nothing starts until a tool is called. Close it when done.
func (p *Project) MCP(version string) *mcpclient.Pool {
	return mcpclient.New(mcpclient.Options{Servers: p.Config.MCPServers, Root: p.Config.Root, Version: version, Logger: p.log,
		Net: func() *egress.Rules { pol, _ := p.Policy(); return p.Egress(pol) }})
}

// RunDir is the folder of run workflowID in this project's runs_dir
// (runfolder.Name: derived from the ID, never from history).
func (p *Project) RunDir(workflowID string) string {
	return filepath.Join(p.Config.Abs(p.Config.RunsDir), runfolder.Name(workflowID))
}

// Registry loads the tools.
func (p *Project) Registry() (*registry.Registry, error) { return registry.Load(p.RegistryOptions()) }

// Policy reads the policy file (absent: allow all, default limits).
func (p *Project) Policy() (*policy.Policy, error) {
	abs := p.Config.Abs(p.Config.Policy)
	return p.policy.load(abs, func() (*policy.Policy, error) { return policy.LoadIn(p.Config.Root, abs, p.Rel(abs)) })
}

// Router builds the request router over a registry and policy.
func (p *Project) Router(reg *registry.Registry, pol *policy.Policy) (*router.Router, error) {
	return router.FromConfig(p.Config, router.CatalogOf(reg), pol.Limits[policy.MaxLLMCalls], p.log.Named("router"), p.llmLog)
}

// ParsePlan parses a plan file's bytes and loads its sub-plans (from the
// project root): every problem, positioned.
func (p *Project) ParsePlan(file string, data []byte) (*plan.Plan, caperr.Problems) {
	pl, probs := plan.Parse(file, data)
	if len(probs) == 0 {
		probs = plan.LoadSubPlans(pl, p.Config.Root, planfile.Read)
	}
	return pl, probs
}

// Check runs the preflight checks of a plan against the project.
// optionalInputs lets `plan check` run before inputs are known.
func (p *Project) Check(pl *plan.Plan, inputs map[string]any, reg *registry.Registry, pol *policy.Policy, optionalInputs bool) *preflight.Report {
	deps := depcheck.New()
	deps.MCPServers = map[string][]string{}
	for name, s := range p.Config.MCPServers {
		deps.MCPServers[name] = s.Command
	}
	return preflight.Check(preflight.Request{Plan: pl, Inputs: inputs, Registry: reg, Policy: pol,
		MinConfidence: p.Config.Router.MinConfidence, Deps: deps, InputsOptional: optionalInputs,
		CacheTTL: p.Config.CacheTTL(), CapabilityLimits: p.Config.Limits, Models: slices.Sorted(maps.Keys(p.Config.LLM)),
		Literals: p.Literals})
}
