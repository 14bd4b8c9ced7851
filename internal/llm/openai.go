package llm

import (
	"context"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openAI speaks chat completions with tool calls (OpenAI, and every
// OpenAI-compatible server: vLLM, llama.cpp, Ollama).
type openAI struct {
	p Provider
	c openai.Client
}

func newOpenAI(p Provider, key string, hc *http.Client) *openAI {
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if p.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(p.BaseURL))
	}
	return &openAI{p: p, c: openai.NewClient(opts...)}
}

func (o *openAI) Complete(ctx context.Context, r Request) (Response, error) {
	return bounded(ctx, o.p, func(ctx context.Context) (Response, error) { return o.complete(ctx, r) })
}

func (o *openAI) complete(ctx context.Context, r Request) (Response, error) {
	params := openai.ChatCompletionNewParams{Model: o.p.Model, Messages: openAIMessages(r), Temperature: openai.Float(0),
		MaxCompletionTokens: openai.Int(maxTokens(r))}
	for _, t := range r.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Parameters)}))
	}
	if r.JSON {
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	}
	res, err := o.c.Chat.Completions.New(ctx, params)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return Response{}, httpError(o.p, apiErr.StatusCode, err)
		}
		return Response{}, callError(o.p.Name, err)
	}
	out := Response{ID: res.ID, Model: res.Model, Raw: res.RawJSON(),
		Usage: Usage{InputTokens: res.Usage.PromptTokens, OutputTokens: res.Usage.CompletionTokens}}
	if len(res.Choices) == 0 {
		return out, callError(o.p.Name, errors.New("the answer has no choices"))
	}
	m := res.Choices[0].Message
	out.Text = m.Content
	for _, c := range m.ToolCalls {
		out.Calls = append(out.Calls, Call{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out, nil
}

// openAIMessages is a request's conversation as chat-completion messages.
func openAIMessages(r Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if r.System != "" {
		out = append(out, openai.SystemMessage(r.System))
	}
	for _, m := range r.Messages {
		switch m.Role {
		case RoleTool:
			out = append(out, openai.ToolMessage(m.Content, m.CallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments}}})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			out = append(out, openai.UserMessage(m.Content))
		}
	}
	return out
}
