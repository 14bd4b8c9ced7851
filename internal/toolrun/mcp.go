package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/mcpclient"
)

// runMCP calls an MCP server's tool (docs/mcp.md): the step's data is the
// tool's structuredContent, else {"content": [its content blocks]};
// isError fails the step with TOOL_FAILURE and the tool's text; progress
// notifications are live feedback.
func (r *Runner) runMCP(ctx context.Context, req Request, b *envelope.Builder, red *envelope.Redactor) envelope.Envelope {
	m := req.Manifest
	ep := m.Entrypoint
	if r.MCP == nil {
		return b.Fail(caperr.DependencyUnavailable, fmt.Sprintf("%s: this process has no MCP servers configured (mcp_servers in capflow.yaml)", m.Name), nil)
	}
	// Notifications arrive on the session's goroutine, possibly late.
	var mu sync.Mutex
	var progress []envelope.Feedback
	ended := false
	res, err := r.MCP.Call(ctx, ep.Server, ep.Tool, req.Inputs, func(p *mcpclient.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if ended || len(progress) >= maxProgress {
			return // before its text is made: one may be 16 MiB
		}
		text := fmt.Sprintf("%g", p.Progress)
		if p.Total > 0 {
			text = fmt.Sprintf("%g of %g", p.Progress, p.Total)
		}
		if p.Message != "" {
			// Redacted before it is cut, and before it goes out in a
			// heartbeat; cut as a feedback entry is: 200 messages of 15
			// MiB held 3 GB (found attacking issue 57).
			text = envelope.Truncate(b.Redact(p.Message), envelope.MaxFeedbackEntry) + " (" + text + ")"
		}
		f := envelope.Feedback{Phase: "progress", Level: envelope.LevelInfo, Message: text, Timestamp: envelope.Timestamp(envelope.Now())}
		progress = append(progress, f)
		if req.OnFeedback != nil {
			req.OnFeedback(f)
		}
	})
	mu.Lock()
	ended = true
	b.Append(progress...)
	mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return b.Fail(ctxCode(ctx), fmt.Sprintf("%s: %s (MCP server %s, tool %s)", m.Name, ctxMessage(ctxCode(ctx)), ep.Server, ep.Tool), nil)
		}
		return b.Fail(caperr.CodeOf(err), err.Error(), nil)
	}
	data, err := mcpData(res)
	if err != nil {
		return b.Fail(caperr.ToolFailure, fmt.Sprintf("%s: MCP server %s answered %s out of contract: %v", m.Name, ep.Server, ep.Tool, err), nil)
	}
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without text"
		}
		b.Error("tool", text, "")
		return b.Fail(caperr.ToolFailure, fmt.Sprintf("%s: %s", m.Name, text), data)
	}
	msg := fmt.Sprintf("%s: %s/%s answered", m.Name, ep.Server, ep.Tool)
	if text != "" && res.StructuredContent == nil {
		msg = answerLine(m.Name, text, red)
	}
	return b.Succeed(msg, data)
}

// maxProgress bounds the progress notifications a step keeps.
const maxProgress = 200

// mcpData is a result's data as plain JSON values.
func mcpData(res *mcp.CallToolResult) (any, error) {
	var v any = map[string]any{"content": res.Content}
	if res.StructuredContent != nil {
		v = res.StructuredContent
	}
	if res.Content == nil && res.StructuredContent == nil {
		v = map[string]any{"content": []any{}}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err // 1e400 among them: past float64
	}
	return out, envelope.CheckData(out)
}

// contentText joins a result's text blocks.
func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// answerLine is a step's message from an MCP tool's text: its first line,
// masked, then cut to 200 bytes (masked first: a cut through a secret
// leaves a part that no mask then matches).
func answerLine(name, text string, red *envelope.Redactor) string {
	return fmt.Sprintf("%s: %s", name, caperr.Headline(red.String(caperr.FirstLine(text)), 200))
}
