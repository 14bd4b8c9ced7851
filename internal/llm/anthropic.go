package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicAPI speaks Anthropic's Messages API with tool_use.
type anthropicAPI struct {
	p Provider
	c anthropic.Client
}

func newAnthropic(p Provider, key string, hc *http.Client) *anthropicAPI {
	// No environment defaults: the key is the one the provider names, and
	// no profile or config file of the worker's user is read.
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(key), option.WithHTTPClient(hc),
		option.WithMaxRetries(0)}
	if p.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(p.BaseURL))
	}
	return &anthropicAPI{p: p, c: anthropic.NewClient(opts...)}
}

func (a *anthropicAPI) Complete(ctx context.Context, r Request) (Response, error) {
	return bounded(ctx, a.p, func(ctx context.Context) (Response, error) { return a.complete(ctx, r) })
}

func (a *anthropicAPI) complete(ctx context.Context, r Request) (Response, error) {
	params := anthropic.MessageNewParams{Model: a.p.Model, MaxTokens: maxTokens(r), Messages: anthropicMessages(r.Messages)}
	if r.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: r.System}}
	}
	for _, t := range r.Tools {
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: t.Name,
			Description: anthropic.String(t.Description), InputSchema: inputSchema(t.Parameters)}})
	}
	msg, err := a.c.Messages.New(ctx, params)
	if err != nil {
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return Response{}, httpError(a.p, apiErr.StatusCode, err)
		}
		return Response{}, callError(a.p.Name, err)
	}
	out := Response{ID: msg.ID, Model: string(msg.Model), Raw: msg.RawJSON(),
		Usage: Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			out.Text += b.Text
		case "tool_use":
			out.Calls = append(out.Calls, Call{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		}
	}
	return out, nil
}

// anthropicMessages is a conversation as Messages turns: the results of
// one answer's calls go back together, in one user turn.
func anthropicMessages(ms []Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for _, m := range ms {
		switch m.Role {
		case RoleTool:
			block := anthropic.NewToolResultBlock(m.CallID, m.Content, false)
			if n := len(out); n > 0 && out[n-1].OfUser != nil && isToolResults(out[n-1].OfUser.Content) {
				out[n-1].OfUser.Content = append(out[n-1].OfUser.Content, block)
				continue
			}
			out = append(out, anthropic.NewUserMessage(block))
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, c := range m.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, json.RawMessage(validJSON(c.Arguments)), c.Name))
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		default:
			out = append(out, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
		}
	}
	return out
}

func isToolResults(blocks []anthropic.ContentBlockParamUnion) bool {
	return len(blocks) > 0 && blocks[0].OfToolResult != nil
}

// validJSON is a call's arguments as the tool_use input they came as, or
// an empty object when they were not JSON (the refusal says why).
func validJSON(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	return "{}"
}

// inputSchema is a JSON Schema object as Anthropic's tool input schema.
func inputSchema(s map[string]any) anthropic.ToolInputSchemaParam {
	out := anthropic.ToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{}}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				out.Required = append(out.Required, name)
			}
		}
	} else if req, ok := s["required"].([]string); ok {
		out.Required = req
	}
	for k, v := range s {
		if k != "type" && k != "properties" && k != "required" {
			out.ExtraFields[k] = v
		}
	}
	return out
}
