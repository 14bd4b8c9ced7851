// Package config loads a project's configuration (docs/configuration.md):
// defaults < capflow.yaml < environment (TEMPORAL_*, then CAPFLOW_*) < flags.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	shared "github.com/capflow/capflow/defaults"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/projfile"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// FileName is the project configuration file.
const FileName = "capflow.yaml"

// Config is the effective configuration. Relative paths are relative to Root.
type Config struct {
	Root                string   `mapstructure:"-" json:"root"`
	File                string   `mapstructure:"-" json:"file,omitempty"`
	KitsDirs            []string `mapstructure:"kits_dirs" json:"kits_dirs"`
	ToolsDirs           []string `mapstructure:"tools_dirs" json:"tools_dirs"`
	ActiveKits          []string `mapstructure:"active_kits" json:"active_kits"`
	ToolResolutionOrder []string `mapstructure:"tool_resolution_order" json:"tool_resolution_order"`
	Policy              string   `mapstructure:"policy" json:"policy"`
	StateDir            string   `mapstructure:"state_dir" json:"state_dir"`
	RunsDir             string   `mapstructure:"runs_dir" json:"runs_dir"`
	Temporal            Temporal `mapstructure:"temporal" json:"temporal"`
	Router              Router   `mapstructure:"router" json:"router"`
	// LLM are the model providers by name, as written (the router's fallback names
	// one as router.llm.provider).
	LLM map[string]LLMProvider `mapstructure:"-" json:"llm,omitempty"`
	// Artifacts is where step outputs are stored by digest
	// (docs/artifacts.md).
	Artifacts Artifacts `mapstructure:"artifacts" json:"artifacts"`
	// Cache is the result cache's default (docs/cache.md).
	Cache Cache `mapstructure:"cache" json:"cache"`
	// Telemetry is where traces go (docs/observability.md).
	Telemetry Telemetry `mapstructure:"telemetry" json:"telemetry"`
	// MCPServers are the MCP servers whose tools are capflow tools
	// (docs/mcp.md), by name. Read from the file as written (viper would
	// fold the case of environment variable names).
	MCPServers map[string]MCPServer `mapstructure:"-" json:"mcp_servers,omitempty"`
	// Limits hold the steps of a capability, whichever tool provides it,
	// across every run and worker (docs/manifests.md#limits).
	Limits map[string]manifest.Limits `mapstructure:"-" json:"limits,omitempty"`
}

// MCPServer is how to reach one MCP server: a command speaking stdio, or a
// streamable-HTTP URL.
type MCPServer struct {
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// PassEnv names variables of the worker's environment the server gets
	// (its credentials stay out of capflow.yaml).
	PassEnv []string          `json:"pass_env,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// BearerTokenEnv names a variable holding an HTTP server's token.
	BearerTokenEnv string `json:"bearer_token_env,omitempty"`
	// Dir is a stdio server's working directory (relative: the project's).
	Dir string `json:"dir,omitempty"`
	// StartTimeout bounds starting and initializing a connection (a Go
	// duration; default 30s).
	StartTimeout string `json:"start_timeout,omitempty"`
}

// Telemetry says where OpenTelemetry spans are exported.
type Telemetry struct {
	// OTLPEndpoint is an OTLP/HTTP collector's base URL ("": no tracing).
	OTLPEndpoint string `mapstructure:"otlp_endpoint" json:"otlp_endpoint,omitempty"`
	// ServiceName overrides the spans' service.name.
	ServiceName string `mapstructure:"service_name" json:"service_name,omitempty"`
}

// Cache holds the cache's project defaults.
type Cache struct {
	// TTL: how old a cached result a step that opts in may reuse.
	TTL string `mapstructure:"ttl" json:"ttl"`
}

// CacheTTL is cache.ttl as a duration (validated at Load).
func (c *Config) CacheTTL() time.Duration {
	d, err := time.ParseDuration(c.Cache.TTL)
	if err != nil {
		return 168 * time.Hour
	}
	return d
}

// Artifacts says where the artifact store is.
type Artifacts struct {
	// URL: file:///absolute/folder or s3://bucket?endpoint=...; "" is
	// the host-local <state_dir>/artifacts.
	URL string `mapstructure:"url" json:"url,omitempty"`
}

// Temporal says how to reach the server.
type Temporal struct {
	Address   string `mapstructure:"address" json:"address"`
	Namespace string `mapstructure:"namespace" json:"namespace"`
	TaskQueue string `mapstructure:"task_queue" json:"task_queue"`
	// UIURL is the Web UI runs are linked to ("": the frontend's host,
	// its port + 1000).
	UIURL string `mapstructure:"ui_url" json:"ui_url,omitempty"`
	// SegmentEvents is the history length at which a long run continues
	// as new (docs/limits.md); recorded per run by the worker resolving it.
	SegmentEvents int `mapstructure:"segment_events" json:"segment_events"`
	// HostWait is how long a run's step waits for a worker on the run's
	// host before the host is taken as lost (a Go duration).
	HostWait string `mapstructure:"host_wait" json:"host_wait"`
	// EagerSteps sends a run's steps to the workflow's own queue, asking
	// the server to start them on the worker that completed the workflow
	// task (the run's host while the run stays there): one hand-off a step
	// less where the server has system.enableActivityEagerExecution on.
	EagerSteps bool `mapstructure:"eager_steps" json:"eager_steps"`
	TLS        TLS  `mapstructure:"tls" json:"tls"`
	// APIKey comes from the environment only and is never printed.
	APIKey string `mapstructure:"api_key" json:"-"`
}

// TLS client settings.
type TLS struct {
	Enabled    bool   `mapstructure:"enabled" json:"enabled"`
	Cert       string `mapstructure:"cert" json:"cert,omitempty"`
	Key        string `mapstructure:"key" json:"key,omitempty"`
	CA         string `mapstructure:"ca" json:"ca,omitempty"`
	ServerName string `mapstructure:"server_name" json:"server_name,omitempty"`
}

// Router settings (request text to plan).
type Router struct {
	Rules         string  `mapstructure:"rules" json:"rules"`
	MinConfidence float64 `mapstructure:"min_confidence" json:"min_confidence"`
	LLM           LLM     `mapstructure:"llm" json:"llm"`
}

var defaults = map[string]any{
	"kits_dirs":                []string{"kits"},
	"tools_dirs":               []string{"tools"},
	"active_kits":              []string{"core"},
	"tool_resolution_order":    []string{"project_tools", "active_kits"},
	"policy":                   "policy.yaml",
	"state_dir":                ".capflow/state",
	"runs_dir":                 ".capflow/runs",
	"temporal.address":         shared.Address,
	"temporal.namespace":       shared.Namespace,
	"temporal.task_queue":      shared.TaskQueue,
	"temporal.segment_events":  shared.SegmentEvents,
	"temporal.host_wait":       strings.TrimSuffix(shared.HostWait.String(), "0s"),
	"temporal.eager_steps":     false,
	"temporal.tls.enabled":     false,
	"temporal.tls.cert":        "",
	"temporal.tls.key":         "",
	"temporal.tls.ca":          "",
	"temporal.tls.server_name": "",
	"temporal.api_key":         "",
	"router.rules":             "router.yaml",
	"router.min_confidence":    0.7,
	"router.llm.provider":      "",
	"router.llm.api":           "",
	"router.llm.base_url":      "",
	"router.llm.model":         "",
	"router.llm.api_key_env":   "",
	"router.llm.timeout":       "60s",
	"artifacts.url":            "",
	"cache.ttl":                "168h",
	"telemetry.otlp_endpoint":  "",
	"telemetry.service_name":   "",
	"temporal.ui_url":          "",
}

// Options of Load.
type Options struct {
	// Project is the project folder; "" means the current directory.
	Project string
	// File is an explicit config file; "" means <project>/capflow.yaml if present.
	File string
	// Flags maps config keys ("temporal.address") to flags that override them.
	Flags map[string]*pflag.Flag
}

// Load builds the effective configuration.
func Load(opts Options) (*Config, error) {
	root := opts.Project
	if root == "" {
		root = "."
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "project folder")
	}
	if st, err := os.Stat(root); err != nil {
		return nil, caperr.New(caperr.ConfigError, "project folder %s does not exist", root)
	} else if !st.IsDir() {
		return nil, caperr.New(caperr.ConfigError, "project %s is a file, not a folder", root)
	}
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
		_ = v.BindEnv(append([]string{k}, envNames(k)...)...)
	}
	if err := checkEnv(); err != nil {
		return nil, err
	}
	file := opts.File
	explicit := file != ""
	if !explicit {
		file = filepath.Join(root, FileName)
	} else if !filepath.IsAbs(file) {
		file, _ = filepath.Abs(file)
	}
	cfg := &Config{Root: root}
	read := yamldoc.ReadFile
	if !explicit {
		// The project's own file: never through a link out of it.
		read = func(path, display string) ([]byte, error) { return projfile.ReadIn(root, path, display) }
	}
	data, err := read(file, displayPath(root, file))
	switch {
	case err == nil:
		raw, err := parseFile(displayPath(root, file), data)
		if err != nil {
			return nil, err
		}
		// Before viper sees the map: it lowercases its keys in place, and
		// an MCP server's env names keep their case.
		if err := decodeFileOnly(raw, cfg); err != nil {
			return nil, err
		}
		if err := v.MergeConfigMap(raw); err != nil {
			return nil, caperr.Wrap(caperr.ConfigError, err, "merge %s", file)
		}
		cfg.File = file
	case explicit || !errors.Is(err, os.ErrNotExist):
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	for key, f := range opts.Flags {
		if f != nil && f.Changed {
			_ = v.BindPFlag(key, f)
		}
	}
	if err := v.Unmarshal(cfg); err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "configuration")
	}
	cfg.Root = root
	if cfg.File == "" && !explicit {
		cfg.File = ""
	}
	// Lists from the environment arrive as one comma-separated string.
	for _, l := range []*[]string{&cfg.KitsDirs, &cfg.ToolsDirs, &cfg.ActiveKits, &cfg.ToolResolutionOrder} {
		*l = splitList(*l)
	}
	return cfg, cfg.validate()
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		out = append(out, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })...)
	}
	return out
}

func (c *Config) validate() error {
	for _, o := range c.ToolResolutionOrder {
		if o != "project_tools" && o != "active_kits" {
			return caperr.New(caperr.ConfigError, "tool_resolution_order: %q is not project_tools or active_kits", o).At(c.fileOrEnv(), 0, 0, "tool_resolution_order")
		}
	}
	if _, err := c.RouterLLM(); err != nil {
		return err
	}
	if c.Router.MinConfidence < 0 || c.Router.MinConfidence > 1 {
		return caperr.New(caperr.ConfigError, "router.min_confidence %v is not between 0 and 1", c.Router.MinConfidence).At(c.fileOrEnv(), 0, 0, "router.min_confidence")
	}
	for _, d := range [][2]string{{"state_dir", c.StateDir}, {"runs_dir", c.RunsDir}} {
		if err := c.checkDir(d[0], d[1]); err != nil {
			return err
		}
	}
	if d, err := time.ParseDuration(c.Temporal.HostWait); err != nil || d < time.Second || d > 24*time.Hour {
		return caperr.New(caperr.ConfigError, "temporal.host_wait %q is not a duration between 1s and 24h", c.Temporal.HostWait).At(c.fileOrEnv(), 0, 0, "temporal.host_wait")
	}
	if d, err := time.ParseDuration(c.Cache.TTL); err != nil || d <= 0 {
		return caperr.New(caperr.ConfigError, "cache.ttl %q is not a positive duration like 24h", c.Cache.TTL).At(c.fileOrEnv(), 0, 0, "cache.ttl")
	}
	if n := c.Temporal.SegmentEvents; n < 100 || n > 40000 {
		return caperr.New(caperr.ConfigError, "temporal.segment_events %d is not between 100 and 40000", n).At(c.fileOrEnv(), 0, 0, "temporal.segment_events")
	}
	if c.Temporal.TaskQueue == "" || c.Temporal.Namespace == "" || c.Temporal.Address == "" {
		return caperr.New(caperr.ConfigError, "temporal.address, namespace and task_queue must not be empty").At(c.fileOrEnv(), 0, 0, "temporal")
	}
	return nil
}

// checkDir refuses a state or runs folder capflow must not write into: the
// filesystem root (a read-only check would write /registry-cache.json) or
// something that exists and is not a folder.
func (c *Config) checkDir(key, dir string) error {
	if dir == "" {
		return caperr.New(caperr.ConfigError, "%s must not be empty", key).At(c.fileOrEnv(), 0, 0, key)
	}
	abs := filepath.Clean(c.Abs(dir))
	if abs == string(filepath.Separator) || abs == filepath.VolumeName(abs)+string(filepath.Separator) {
		return caperr.New(caperr.ConfigError, "%s %q is the filesystem root: choose a folder of its own (default %s)", key, dir, defaults[key]).At(c.fileOrEnv(), 0, 0, key)
	}
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		return caperr.New(caperr.ConfigError, "%s %q exists and is not a folder", key, dir).At(c.fileOrEnv(), 0, 0, key)
	}
	return nil
}

func (c *Config) fileOrEnv() string {
	if c.File != "" {
		return displayPath(c.Root, c.File)
	}
	return "environment"
}

func displayPath(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// parseFile validates capflow.yaml with positions: unknown keys are named
// with their line and a suggestion.
func parseFile(display string, data []byte) (map[string]any, error) {
	doc, err := yamldoc.Parse(display, data)
	if err != nil {
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	if doc.Root.Kind == yamldoc.Null {
		return map[string]any{}, nil
	}
	if doc.Root.Kind != yamldoc.Map {
		return nil, caperr.New(caperr.ConfigError, "capflow.yaml must be a mapping").At(display, doc.Root.Pos.Line, doc.Root.Pos.Column, "")
	}
	raw := doc.Root.Interface().(map[string]any)
	sch := schema.Embedded("capflow-config.schema.json", schemas.Must("capflow-config.schema.json"))
	probs, inline := inlineKeys(doc, raw, display)
	for _, vi := range sch.Validate(raw) {
		if inline[yamldoc.FieldPath(vi.Path)] {
			continue // said better above
		}
		p := doc.Root.PosOf(vi.Path)
		probs = append(probs, caperr.New(caperr.ConfigError, "%s", vi.Message).At(display, p.Line, p.Column, yamldoc.FieldPath(vi.Path)))
	}
	probs = append(probs, limitsProblems(doc, raw, display)...)
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	return raw, nil
}

// Abs resolves a configured path against the project root.
func (c *Config) Abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Root, p)
}

// String renders the config for logs, with no secret in it.
func (c *Config) String() string {
	return fmt.Sprintf("root=%s file=%s temporal=%s/%s queue=%s kits=%v", c.Root, c.File, c.Temporal.Address, c.Temporal.Namespace, c.Temporal.TaskQueue, c.ActiveKits)
}
