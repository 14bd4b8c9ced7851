// Package llm is capflow's one client of language models: a provider's
// official Go SDK (openai-go for OpenAI and every OpenAI-compatible server,
// anthropic-sdk-go for Anthropic's Messages API) behind one Complete. The
// router's fallback plans through it. A key comes from the environment
// variable its provider names and goes nowhere but the request's header:
// errors and logs of this package never carry it (Redact).
package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

// The wire protocols a provider may speak.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// DefaultMaxTokens bounds an answer when a request names no bound.
const DefaultMaxTokens = 4096

// Provider is one model endpoint.
type Provider struct {
	Name    string `json:"name"`
	API     string `json:"api"` // openai (the default) or anthropic
	BaseURL string `json:"base_url,omitempty"`
	Model   string `json:"model"`
	// Timeout bounds one call (0: only the caller's context does).
	Timeout time.Duration `json:"timeout,omitempty"`
	Price   Price         `json:"price"`
}

// Price is a provider's price per million tokens, in US dollars.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Cost is what usage u costs at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// Role is who says a message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // a tool call's result
)

// Message is one turn of a conversation.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	Calls   []Call `json:"calls,omitempty"`   // an assistant's tool calls
	CallID  string `json:"call_id,omitempty"` // a tool message's: the call it answers
}

// Tool is a function offered to the model.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"` // a JSON Schema of an object
}

// Call is one function call a model proposed.
type Call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // as the model wrote them: not always JSON
}

// Request is one call to a model.
type Request struct {
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// JSON asks for one JSON object as the answer (OpenAI's json_object
	// format; Anthropic has none: the system prompt must ask).
	JSON      bool  `json:"json,omitempty"`
	MaxTokens int64 `json:"max_tokens,omitempty"` // 0: DefaultMaxTokens
}

// Usage is what a call used, as the provider counted it.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Response is a model's answer.
type Response struct {
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`
	Text  string `json:"text,omitempty"`
	Calls []Call `json:"calls,omitempty"`
	Usage Usage  `json:"usage"`
	// Raw is the answer as it came (LLM_LOG prints it, redacted).
	Raw string `json:"-"`
}

// Client calls one provider's model.
type Client interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// New is the client of provider p with key over hc (nil: the default
// client). No SDK retries: the caller counts its calls (max_llm_calls).
func New(p Provider, key string, hc *http.Client) (Client, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	hc = bodyBound(hc, MaxAnswerBytes)
	if p.Model == "" {
		return nil, caperr.New(caperr.ConfigError, "llm %s names no model", p.Name)
	}
	switch p.API {
	case APIOpenAI, "":
		return newOpenAI(p, key, hc), nil
	case APIAnthropic:
		return newAnthropic(p, key, hc), nil
	}
	return nil, caperr.New(caperr.ConfigError, "llm %s: api %q is neither %s nor %s", p.Name, p.API, APIOpenAI, APIAnthropic)
}

// Error is a call that failed: its contract error (caperr.CodeOf reads
// it), whether another call may do better, and the HTTP status when the
// provider answered.
type Error struct {
	Retry  bool
	Status int
	Err    *caperr.Error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether err is worth another call (a 5xx, 429, a
// network failure, an answer that could not be read).
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retry
}

// httpError classifies a provider's HTTP answer: a refused key is the
// configuration's, a busy or failing server worth another call, any other
// refusal the configuration's.
func httpError(p Provider, status int, err error) *Error {
	provider := p.Name
	if p.BaseURL != "" {
		provider += " (" + p.BaseURL + ")"
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &Error{Status: status, Err: caperr.New(caperr.ConfigError, "the LLM endpoint of %s refused the API key (HTTP %d)", provider, status)}
	case status == http.StatusTooManyRequests || status >= 500:
		return &Error{Retry: true, Status: status, Err: caperr.New(caperr.DependencyUnavailable, "the LLM endpoint of %s answered HTTP %d", provider, status)}
	}
	return &Error{Status: status, Err: caperr.New(caperr.ConfigError, "the LLM endpoint of %s answered HTTP %d: %v", provider, status, err)}
}

// callError is a call's error that is not the provider's HTTP answer: the
// network, or an answer the SDK could not read (both worth another call).
func callError(provider string, err error) *Error {
	return &Error{Retry: true, Err: caperr.Wrap(caperr.DependencyUnavailable, err, "LLM %s", provider)}
}

func maxTokens(r Request) int64 {
	if r.MaxTokens > 0 {
		return r.MaxTokens
	}
	return DefaultMaxTokens
}

// bounded runs call under p's timeout (none when 0: the caller's context
// bounds it) and says how it ended when its context did: the caller's
// cancellation (not retried) or the call's own timeout (worth another).
func bounded(ctx context.Context, p Provider, call func(context.Context) (Response, error)) (Response, error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if p.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, p.Timeout)
	}
	defer cancel()
	res, err := call(cctx)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, &Error{Err: caperr.Wrap(caperr.Cancelled, ctx.Err(), "LLM %s: the call was cancelled", p.Name)}
	case cctx.Err() != nil:
		return res, &Error{Retry: true, Err: caperr.New(caperr.TaskTimeout, "LLM %s timed out after %s", p.Name, p.Timeout)}
	}
	return res, err
}

// Redacting is c with key masked in what it answers and its errors say
// (an endpoint may echo the request, its header with it).
func Redacting(c Client, key string) Client {
	if key == "" {
		return c
	}
	return redacting{c, envelope.NewRedactor(key)}
}

type redacting struct {
	c   Client
	red *envelope.Redactor
}

func (r redacting) Complete(ctx context.Context, req Request) (Response, error) {
	res, err := r.c.Complete(ctx, req)
	// Every string of the answer: an endpoint that echoes the request may
	// put the key in any of them.
	res.Raw, res.Text, res.ID, res.Model = r.red.String(res.Raw), r.red.String(res.Text), r.red.String(res.ID), r.red.String(res.Model)
	for i, c := range res.Calls {
		res.Calls[i] = Call{ID: r.red.String(c.ID), Name: r.red.String(c.Name), Arguments: r.red.String(c.Arguments)}
	}
	if err == nil {
		return res, nil
	}
	msg := r.red.String(err.Error())
	var e *Error
	if errors.As(err, &e) {
		return res, &Error{Retry: e.Retry, Status: e.Status, Err: caperr.New(e.Err.Code, "%s", msg)}
	}
	return res, caperr.New(caperr.CodeOf(err), "%s", msg)
}

// MaxAnswerBytes bounds a provider's answer as it is read: a hostile or
// broken endpoint cannot fill the worker's memory (an answer of
// DefaultMaxTokens is some 16 KB).
const MaxAnswerBytes = 4 << 20

// bodyBound is hc whose answers' bodies fail past max bytes.
func bodyBound(hc *http.Client, max int64) *http.Client {
	c := *hc
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = boundedTransport{rt, max}
	return &c
}

type boundedTransport struct {
	rt  http.RoundTripper
	max int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.rt.RoundTrip(r)
	if err == nil && res.Body != nil {
		res.Body = &boundedBody{rc: res.Body, left: t.max}
	}
	return res, err
}

// boundedBody reads at most left bytes, then fails.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer is past %d MiB: not read further", MaxAnswerBytes>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
