// Package toolrun runs one tool once: command tools per the tool protocol
// (docs/tool-protocol.md), http tools and builtin tools. Whatever happens,
// the result is an envelope; the runner never returns a Go error.
package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/mcpclient"
	"github.com/capflow/capflow/internal/sandbox"
	"github.com/capflow/capflow/internal/schema"
)

// Request is one run of one tool.
type Request struct {
	Manifest *manifest.Manifest
	Inputs   map[string]any
	RunID    string
	StepID   string
	// Label names the step, or an item as id[index] (StepID: its step).
	Label   string
	Attempt int
	// Root is the project root: the working directory of command tools
	// and the base of relative paths in inputs.
	Root string
	// RunDir is the run's folder; Workdir the step's (created if missing).
	RunDir  string
	Workdir string
	// Records is where the engine keeps the step's records, out of the
	// tool's reach (runfolder.Records): a command tool's input file is
	// written there, and the tool reads it ("": Workdir).
	Records string
	// Secrets maps the manifest's secret names to values (from the
	// worker's environment); they are handed to the tool and redacted
	// from everything it returns.
	Secrets map[string]string
	// OnFeedback receives live feedback events (heartbeats).
	OnFeedback func(envelope.Feedback)
	// OnStderr receives the tool's plain stderr lines, redacted (the live
	// view of capflow run --verbose).
	OnStderr func(line string)
	// Sandbox is the project policy's confinement of command tools.
	Sandbox sandbox.Mode
	// Net is what the run may reach on the network (nil: public
	// addresses only).
	Net *egress.Rules
	// Folders are the tool's write folders, held open by the caller from
	// before the tool starts until its output files are read (nil: opened
	// here for the run).
	Folders sandbox.Folders
	// Budget, when set, bounds a builtin's own evaluation (not the schema
	// checks around it), or a command's run, which is killed at once past
	// it: an inline step's (internal/step/inline.go).
	Budget time.Duration
}

// Runner holds what every run needs.
type Runner struct {
	Logger hclog.Logger
	// Grace is the time between SIGTERM and SIGKILL; 0 means 5s.
	Grace time.Duration
	// MaxStdout bounds the stdout kept for the envelope and the log
	// file; 0 means 8 MiB. More output is dropped and noted.
	MaxStdout int64
	// Support is what the machine offers for confinement (nil: probed).
	Support *sandbox.Support
	// Hide are files and folders a confined tool must not see (the
	// worker's ownership key).
	Hide []string
	// MCP calls the tools of the project's MCP servers (nil: none).
	MCP *mcpclient.Pool
	// Protected are the project's paths (relative to its root) no write
	// folder may lead to, beyond manifest.Protected
	// (config.Config.Protected).
	Protected []string
	// Private are the project's folders a step sees only its own run of:
	// the runs folder and the engine's state (absolute; config.Private).
	Private []string

	schemas sync.Map // digest|in|out -> *schema.Schema
}

func (r *Runner) logger() hclog.Logger {
	if r.Logger == nil {
		return hclog.NewNullLogger()
	}
	return r.Logger
}

// SecretsFromEnv picks the manifest's secrets from an environment lookup.
func SecretsFromEnv(m *manifest.Manifest, lookup func(string) (string, bool)) map[string]string {
	out := map[string]string{}
	for _, s := range m.Secrets {
		if v, ok := lookup(s); ok {
			out[s] = v
		}
	}
	return out
}

// Run runs the tool and returns its envelope.
func (r *Runner) Run(ctx context.Context, req Request) envelope.Envelope {
	m := req.Manifest
	var secretVals []string
	for _, v := range req.Secrets {
		secretVals = append(secretVals, v)
	}
	red := envelope.NewRedactor(secretVals...)
	b := envelope.NewBuilder(m.Name).WithRedactor(red)
	log := r.logger().With("tool", m.ID(), "step", req.StepID)

	if req.Inputs == nil {
		req.Inputs = map[string]any{}
	}
	req.Net = req.Net.For(req.RunDir)
	if vs := r.validate(m, "in", m.InputSchema, req.Inputs, red); len(vs) > 0 {
		b.Error("validate", "inputs do not match the tool's input_schema", joinViolations(vs))
		return b.Fail(caperr.SchemaViolation, fmt.Sprintf("%s%s: %s", caperr.InputsRefused, m.Name, firstViolations(vs)), nil)
	}
	// A builtin that touches no file needs no folder (what keeps its
	// envelope makes one when it writes).
	if req.Workdir != "" && !(m.Entrypoint.Type == manifest.EntryBuiltin && builtin.NoFiles(m.Entrypoint.Name, req.Inputs)) {
		if err := os.MkdirAll(req.Workdir, 0o755); err != nil {
			return b.Fail(caperr.ObservabilityError, "cannot create step folder: "+err.Error(), nil)
		}
	}
	var env envelope.Envelope
	switch m.Entrypoint.Type {
	case manifest.EntryCommand:
		env = r.runCommand(ctx, req, b, red, log)
	case manifest.EntryHTTP:
		env = r.runHTTP(ctx, req, b, red)
	case manifest.EntryBuiltin:
		env = runBuiltin(ctx, req, b, builtinProtected(r.Protected), r.Private)
	case manifest.EntryMCP:
		env = r.runMCP(ctx, req, b, red)
	default:
		env = b.Fail(caperr.InvalidInput, "unknown entrypoint type "+m.Entrypoint.Type, nil)
	}
	if env.Success {
		if vs := r.validate(m, "out", m.OutputSchema, env.Data, red); len(vs) > 0 {
			b2 := envelope.NewBuilder(m.Name).WithRedactor(red)
			b2.Append(env.Feedback...)
			b2.Error("validate", "data does not match the tool's output_schema", joinViolations(vs))
			env = b2.Fail(caperr.SchemaViolation, fmt.Sprintf("output of %s: %s", m.Name, firstViolations(vs)), env.Data)
		}
	}
	red.Envelope(&env)
	env.ToolID = m.Name
	if env.Feedback == nil {
		env.Feedback = []envelope.Feedback{} // the envelope's feedback is a list, never null
	}
	log.Debug("tool finished", "success", env.Success, "exit_code", env.ExitCode, "duration_ms", env.DurationMS)
	return env
}

// validate checks v against one of the tool's schemas, compiled once per
// manifest digest: compiling (with its metaschema check) costs far more
// than validating, and a worker runs the same tools over and over.
func (r *Runner) validate(m *manifest.Manifest, which string, sch map[string]any, v any, red *envelope.Redactor) []schema.Violation {
	if len(sch) == 0 {
		return nil
	}
	key := m.Digest + "|" + which
	if m.Digest == "" {
		key = ""
	}
	var s *schema.Schema
	if c, ok := r.schemas.Load(key); ok && key != "" {
		s = c.(*schema.Schema)
	} else {
		var vs []schema.Violation
		if s, vs = schema.Compile(sch); len(vs) > 0 {
			return vs
		}
		if key != "" {
			r.schemas.Store(key, s)
		}
	}
	if v == nil {
		v = map[string]any{}
	}
	// Masked before the messages are cut: a cut secret is not found whole.
	return s.ValidateJSON(v, red.String)
}

// firstViolations is what a step's message says of its violations: the
// first few, and how many there are, which its feedback lists (a list of
// 1,000 wrong items was a wall of text cut at 4 KiB, its count lost).
func firstViolations(vs []schema.Violation) string {
	const few = 5
	if len(vs) <= few+1 {
		return joinViolations(vs)
	}
	return joinViolations(vs[:few]) + fmt.Sprintf("; and %d more lines in the step's feedback", len(vs)-few)
}

func joinViolations(vs []schema.Violation) string {
	var parts []string
	for _, v := range vs {
		p := strings.Join(v.Path, ".")
		if p == "" {
			parts = append(parts, v.Message)
		} else {
			parts = append(parts, p+": "+v.Message)
		}
	}
	return strings.Join(parts, "; ")
}

func runBuiltin(ctx context.Context, req Request, b *envelope.Builder, protected, private []string) envelope.Envelope {
	f, ok := builtin.Lookup(req.Manifest.Entrypoint.Name)
	if !ok {
		return b.Fail(caperr.ToolNotFound, fmt.Sprintf("no builtin named %q in this worker", req.Manifest.Entrypoint.Name), nil)
	}
	if req.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Budget)
		defer cancel()
	}
	env := &builtin.Env{Root: req.Root, Workdir: req.Workdir, RunDir: req.RunDir, Feedback: b,
		Sandbox: req.Sandbox, Confine: req.Manifest.Sandbox, Net: req.Net, Folders: req.Folders, Protected: protected, Private: private}
	data, err := func() (data any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = caperr.New(caperr.InternalError, "builtin %s panicked: %v", req.Manifest.Entrypoint.Name, p)
			}
		}()
		return f(ctx, req.Inputs, env)
	}()
	if err != nil {
		code := caperr.CodeOf(err)
		if ctx.Err() != nil {
			code = ctxCode(ctx)
		}
		return b.Fail(code, err.Error(), data)
	}
	return b.Succeed(fmt.Sprintf("%s done", req.Manifest.Name), data)
}

func ctxCode(ctx context.Context) caperr.Code {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return caperr.TaskTimeout
	}
	return caperr.Cancelled
}

// decodeEnvelope parses a tool-produced envelope and adapts it to the
// manifest's tool id.
func decodeEnvelope(b []byte) (*envelope.Envelope, error) {
	env, err := envelope.Parse(b)
	if err != nil {
		return nil, err
	}
	// Numbers become float64, as JSON decodes them everywhere else, so
	// data travels through Temporal and schema checks the same way
	// (Parse keeps them exact to refuse one past float64: none is left).
	// In place: a JSON round trip here cost an 8 MiB envelope 780 MB.
	env.Data = floatNumbers(env.Data)
	return env, nil
}

// floatNumbers turns every json.Number in v into its float64, in place.
func floatNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, x := range t {
			t[k] = floatNumbers(x)
		}
	case []any:
		for i, x := range t {
			t[i] = floatNumbers(x)
		}
	}
	return v
}

// knownCode gives a tool's failed envelope a contract code. No code is
// TOOL_FAILURE; a code capflow does not know is TOOL_FAILURE too, but not
// retried (what capflow cannot classify it does not repeat), the tool's
// code named in the message.
func knownCode(env *envelope.Envelope) {
	switch {
	case env.Error == nil:
		env.Error = envelope.ErrorFor(caperr.ToolFailure)
	case !caperr.Known(env.Error.Code):
		unknown := env.Error.Code
		env.Error = envelope.ErrorFor(caperr.ToolFailure)
		env.Error.Retryable = false
		// "final", not "not retried": the step's own note says whether
		// and why it is not retried (once, for one reason).
		env.Message += fmt.Sprintf(" (the tool's error code %q is not a contract code: TOOL_FAILURE, final)", unknown)
	case !slices.Contains(caperr.Severities, env.Error.Severity):
		// A tool that gave none, or one capflow does not know, has its
		// code's (docs/errors.md), and is told so.
		given := env.Error.Severity
		env.Error.Severity = caperr.Lookup(env.Error.Code).Severity
		if given != "" {
			warnTool(env, fmt.Sprintf("the tool's severity %s is not one of %v: its code's, %s, is used", envelope.Quote(string(given)), caperr.Severities, env.Error.Severity))
		}
	}
	if env.Error.Cause != "" && !caperr.Known(caperr.Code(env.Error.Cause)) {
		// A code only: megabytes of one passed every bound of history.
		warnTool(env, fmt.Sprintf("the tool's cause %s is not a contract code: dropped", envelope.Quote(string(env.Error.Cause))))
		env.Error.Cause = ""
	}
}

// warnTool adds a warning about the tool's envelope to its feedback.
func warnTool(env *envelope.Envelope, msg string) {
	env.Feedback = append(env.Feedback, envelope.Feedback{Phase: "envelope", Level: envelope.LevelWarning, Message: msg, Timestamp: envelope.Timestamp(envelope.Now())})
}

// builtinProtected is what no builtin writes: what no tool's write:
// folder may hold, but of the state folder (.capflow) only the state and
// runs folders the configuration names (plans write their outputs in
// .capflow/out) when it names them.
func builtinProtected(configured []string) []string {
	out := slices.Clone(configured)
	for _, p := range manifest.Protected {
		if p != ".capflow" || len(configured) == 0 {
			out = append(out, p)
		}
	}
	return out
}
