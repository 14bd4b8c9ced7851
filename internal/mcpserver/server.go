// Package mcpserver offers capflow to MCP clients (docs/mcp.md): route,
// plan_check, run, status, decide, cancel and report, each the capflow
// command of that name run in this process; a tool's structuredContent is
// the command's envelope.
package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/yamldoc"
)

// MaxPlanFile bounds a plan file an MCP client names (as the plan
// parser's own bound on a YAML document).
const MaxPlanFile = yamldoc.MaxFileSize

// Exec runs one capflow command: its envelope (JSON) goes to stdout, its
// live lines to stderr; it returns the exit code.
type Exec func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Options of a server.
type Options struct {
	Exec Exec
	// Args go after every command's own (--project, --config).
	Args []string
	// PlanDir is where plans given as objects are written (made on use).
	PlanDir string
	// Root is the project root: a plan's relative path is the project's
	// (an agent starts the server wherever it likes).
	Root string
	// By names who decides (recorded with each decision).
	By      string
	Version string
}

// New is the MCP server with capflow's tools.
func New(o Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "capflow", Title: "capflow: durable capability plans on Temporal", Version: o.Version}, nil)
	h := &handlers{o: o}
	for _, t := range tools {
		tool := &mcp.Tool{Name: t.name, Description: t.description, InputSchema: json.RawMessage(t.input), OutputSchema: json.RawMessage(envelopeSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.readOnly}}
		s.AddTool(tool, h.handler(t))
	}
	return s
}

type handlers struct {
	o  Options
	mu sync.Mutex // plan files are written one at a time
}

// args are a call's arguments, every tool's fields in one.
type args struct {
	Text     string          `json:"text"`
	Plan     json.RawMessage `json:"plan"`
	Inputs   map[string]any  `json:"inputs"`
	Wait     bool            `json:"wait"`
	ID       string          `json:"id"`
	Step     string          `json:"step"`
	Action   string          `json:"action"`
	Comment  string          `json:"comment"`
	Proposal string          `json:"proposal"`
}

func (h *handlers) handler(t toolDef) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a args
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return failed("the arguments are not what " + t.name + " takes: " + err.Error()), nil
			}
		}
		c, err := t.command(h, a)
		if err != nil {
			return failed(err.Error()), nil
		}
		var out bytes.Buffer
		live := &progress{ctx: ctx, req: req}
		h.o.Exec(ctx, c.argv(h.o.Args), &out, live)
		return result(out.Bytes()), nil
	}
}

// result is a command's envelope as a tool result.
func result(raw []byte) *mcp.CallToolResult {
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		return failed("capflow printed no envelope: " + strings.TrimSpace(string(raw)))
	}
	ok, _ := env["success"].(bool)
	msg, _ := env["message"].(string)
	return &mcp.CallToolResult{StructuredContent: env, IsError: !ok, Content: []mcp.Content{&mcp.TextContent{Text: msg + nextLines(env)}}}
}

// nextLines are the envelope's "next" feedback (what to do about each
// failure, docs/errors.md), a line each, for a client that reads only
// the text.
func nextLines(env map[string]any) string {
	fb, _ := env["feedback"].([]any)
	var b strings.Builder
	for _, f := range fb {
		if m, _ := f.(map[string]any); m["phase"] == "next" {
			text, _ := m["message"].(string)
			b.WriteString("\nnext: " + text)
		}
	}
	return b.String()
}

// failed is a call refused before any command ran, as an envelope.
func failed(msg string) *mcp.CallToolResult {
	env := map[string]any{"toolId": "capflow-mcp", "exitCode": 2, "success": false, "message": msg, "feedback": []any{},
		"error": map[string]any{"code": "INVALID_INPUT", "severity": "HIGH", "retryable": false}}
	return &mcp.CallToolResult{StructuredContent: env, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// planFile is the plan argument as a file: a plan file of the project
// (a relative path is the project root's), or a plan object written (as
// JSON, which is YAML) under PlanDir. A path outside the project, or one
// that leads out of it through a link, is refused before anything reads
// it: the plan is opened beneath the project root first (a regular file
// of at most MaxPlanFile bytes), and the command reads that file (a swap
// between the two needs write access to the project, which owns its
// plans anyway).
func (h *handlers) planFile(raw json.RawMessage) (string, error) {
	var path string
	if json.Unmarshal(raw, &path) == nil {
		if path == "" {
			return "", fmt.Errorf("plan: give a plan file's path in the project or a plan object")
		}
		if h.o.Root == "" {
			return "", fmt.Errorf("plan %q: no project to read it from", path)
		}
		rel, ok := beneath.Rel(h.o.Root, path)
		if !ok {
			return "", fmt.Errorf("plan %q is outside the project %s: give a plan file's path in the project", path, h.o.Root)
		}
		if _, err := beneath.ReadFile(h.o.Root, rel, MaxPlanFile, "plan"); err != nil {
			return "", err
		}
		return filepath.Join(h.o.Root, rel), nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return "", fmt.Errorf("plan: give a plan file's path in the project or a plan object")
	}
	sum := sha256.Sum256(raw)
	return h.write("plan-"+hex.EncodeToString(sum[:8])+".yaml", raw, 0o644)
}

// write writes a file the server makes for a call into PlanDir, beneath
// the project root when PlanDir is in it (a link planted at the file's
// name, or at PlanDir, never leads the write out), whole or not at all.
func (h *handlers) write(name string, raw []byte, perm os.FileMode) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	base, rel := h.o.PlanDir, name
	if r, ok := beneath.Rel(h.o.Root, h.o.PlanDir); ok && h.o.Root != "" && filepath.IsAbs(h.o.PlanDir) {
		base, rel = h.o.Root, filepath.Join(r, name)
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	dir, err := os.OpenRoot(base)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	err = beneath.Create(dir, rel, perm, func(w io.Writer) error { _, err := w.Write(raw); return err })
	return filepath.Join(h.o.PlanDir, name), err
}

// inputsFile writes a call's plan inputs for --inputs-file.
func (h *handlers) inputsFile(in map[string]any) ([]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	file, err := h.write("inputs-"+hex.EncodeToString(sum[:8])+".json", raw, 0o600)
	return []string{"--inputs-file=" + file}, err
}

// progress turns a command's live lines into progress notifications
// (when the client asked for them with a progress token).
type progress struct {
	ctx  context.Context
	req  *mcp.CallToolRequest
	mu   sync.Mutex
	part string
	n    float64
}

func (p *progress) Write(b []byte) (int, error) {
	tok := p.req.Params.GetProgressToken()
	if tok == nil {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(p.part+string(b), "\n")
	p.part = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		p.n++
		_ = p.req.Session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: l, Progress: p.n})
	}
	return len(b), nil
}
