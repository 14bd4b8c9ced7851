// Package manifest parses and validates tool manifests (tool.yaml) and kit
// descriptors (kit.yaml), docs/manifests.md. Every problem of a file is
// reported at once, each with file, line, column and field path.
package manifest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Entrypoint types.
const (
	EntryCommand = "command"
	EntryHTTP    = "http"
	EntryBuiltin = "builtin"
	// EntryMCP is a tool of an MCP server named in capflow.yaml's
	// mcp_servers (docs/mcp.md).
	EntryMCP = "mcp"
)

// Execution paths (the manifest's execution field).
const (
	ExecAuto     = "auto"
	ExecActivity = "activity"
	ExecLocal    = "local"
	// ExecInline: a pure builtin, or a quick idempotent command, run with
	// the steps started beside it in one local activity (a batch), each
	// result recorded in history; past a few milliseconds, a local
	// activity of its own.
	ExecInline = "inline"
)

// AutoLocalMax is the longest start-to-close timeout of a tool that
// execution: auto runs as a local activity: a local activity holds its
// workflow's task while it runs, and with it every query (status, the
// console) of the run; a step that may take longer is a regular activity.
const AutoLocalMax = 2 * time.Second

// Local reports whether a step of this tool, with the given effective
// start-to-close timeout, runs as a Temporal local activity: local when
// the manifest says so, auto when idempotent and short; never a tool bound
// to its own task queue (a local activity runs where the workflow does).
func (m *Manifest) Local(timeout time.Duration) bool {
	switch {
	case m.TaskQueue != "", m.Limits != nil:
		// A slot of its limits is leased to an activity that heartbeats.
		return false
	case m.Execution == ExecLocal, m.Execution == ExecInline:
		return true
	case m.Execution == ExecActivity:
		return false
	}
	return m.Idempotent && timeout > 0 && timeout <= AutoLocalMax
}

// Inline reports whether steps of this tool may be evaluated inside the
// workflow task (execution: inline, a builtin or a command); the worker
// decides per step whether its inputs allow it (builtin.Pure) and how long
// it may take.
func (m *Manifest) Inline() bool {
	return m.Execution == ExecInline && (m.Entrypoint.Type == EntryBuiltin || m.Entrypoint.Type == EntryCommand) && m.TaskQueue == "" && m.Limits == nil
}

// Result modes of a command tool.
const (
	ResultEnvelope = "envelope"
	ResultExitCode = "exit_code"
)

// Manifest is a validated tool.yaml.
type Manifest struct {
	Name         string         `json:"name"`
	Version      string         `json:"version"`
	Description  string         `json:"description"`
	Capabilities []string       `json:"capabilities"`
	InputSchema  map[string]any `json:"input_schema,omitempty"`
	OutputSchema map[string]any `json:"output_schema,omitempty"`
	Entrypoint   Entrypoint     `json:"entrypoint"`
	Dependencies []Dependency   `json:"dependencies,omitempty"`
	Secrets      []string       `json:"secrets,omitempty"`
	Idempotent   bool           `json:"idempotent"`
	// Risk: high makes an agent's proposal calling the tool wait for a
	// person (docs/agents.md).
	Risk      string   `json:"risk,omitempty"`
	Stability string   `json:"stability"`
	Priority  int      `json:"priority"`
	Timeouts  Timeouts `json:"timeouts"`
	Retry     Retry    `json:"retry"`
	TaskQueue string   `json:"task_queue,omitempty"`
	// Execution: auto (default), activity, local or inline
	// (docs/manifests.md).
	Execution string `json:"execution"`
	// Sandbox is what the tool needs beyond the default confinement
	// (nil: the defaults).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Cache caches the results of every step using the tool (nil: only
	// steps that ask; docs/cache.md).
	Cache *Cache `json:"cache,omitempty"`
	// Limits hold its steps to a concurrency and a rate across every run
	// and worker (nil: none).
	Limits *Limits `json:"limits,omitempty"`

	// Where it came from, filled by the loader.
	Dir    string `json:"dir"`            // folder holding tool.yaml (command paths resolve here)
	File   string `json:"file"`           // display path of tool.yaml
	Digest string `json:"digest"`         // sha256 of the manifest bytes
	Source string `json:"source"`         // "project" or "kit:<id>"
	Kit    string `json:"kit,omitempty"`  // kit id, when from a kit
	Line   int    `json:"line,omitempty"` // line of "name:" for messages
}

// Entrypoint says how to run the tool.
type Entrypoint struct {
	Type    string            `json:"type"`
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Name    string            `json:"name,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Result  string            `json:"result,omitempty"`
	// PassEnv: variables of the worker's environment a command tool
	// inherits, by name or by a prefix ending in * (RCLONE_CONFIG_*): a
	// configuration that lives in the environment, never in history.
	PassEnv []string `json:"pass_env,omitempty"`
	// Server and Tool: an mcp entrypoint's server (mcp_servers) and the
	// name of its tool there.
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
}

// Dependency kinds.
const (
	DepBinary  = "binary"
	DepEnv     = "env"
	DepService = "service"
	// DepRcloneRemote: the rclone remote a step's input (the field Name)
	// names must be configured where the step runs.
	DepRcloneRemote = "rclone_remote"
	// DepMCPServer is implied by an mcp entrypoint (its server must be
	// configured); never written in tool.yaml.
	DepMCPServer = "mcp_server"
)

// Needs is what the tool needs on a worker: its declared dependencies and
// what its entrypoint implies (an mcp tool's server).
func (m *Manifest) Needs() []Dependency {
	if m.Entrypoint.Type != EntryMCP {
		return m.Dependencies
	}
	return append(slices.Clone(m.Dependencies), Dependency{Kind: DepMCPServer, Name: m.Entrypoint.Server})
}

// Dependency is something the tool needs on the worker.
type Dependency struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
	// Install says how to get it, in the gap when it is missing.
	Install string `json:"install,omitempty"`
}

// Timeouts of one run of the tool.
type Timeouts struct {
	StartToClose Duration `json:"start_to_close,omitempty"`
	Heartbeat    Duration `json:"heartbeat,omitempty"`
}

// Retry policy of the tool; zero fields fall back to the plan's defaults.
type Retry struct {
	MaxAttempts     int      `json:"max_attempts,omitempty"`
	InitialInterval Duration `json:"initial_interval,omitempty"`
	Backoff         float64  `json:"backoff,omitempty"`
	MaxInterval     Duration `json:"max_interval,omitempty"`
}

// ID is name@version.
func (m *Manifest) ID() string { return m.Name + "@" + m.Version }

// Origin is where a tool comes from: its kit's id, or "project".
func (m *Manifest) Origin() string {
	if m.Kit != "" {
		return m.Kit
	}
	return "project"
}

// UID names a tool uniquely, even when two kits hold the same
// name@version: origin/name@version (core/file-read@1.0.0).
func (m *Manifest) UID() string { return m.Origin() + "/" + m.ID() }

// Provides reports whether the tool declares capability c.
func (m *Manifest) Provides(c string) bool {
	for _, x := range m.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Duration is a time.Duration written as "5m" in YAML and JSON.
type Duration time.Duration

// D returns the standard library duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like 30s or 5m")
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// CapabilityPattern is the contract's `domain.action` form.
var CapabilityPattern = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_]+$`)

// RiskHigh is tool.yaml's risk: high.
const RiskHigh = "high"

// Risky reports whether an agent's call of the tool waits for a person
// under approve: risky: it is not idempotent, or says risk: high.
func (m *Manifest) Risky() bool { return !m.Idempotent || m.Risk == RiskHigh }

// ValidCapability reports whether c is `domain.action`.
func ValidCapability(c string) bool { return CapabilityPattern.MatchString(c) }
