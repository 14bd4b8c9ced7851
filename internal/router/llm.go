package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/registry"
)

// LLM plans through a model (internal/llm: the provider's official SDK).
type LLM struct {
	API     string // llm.APIOpenAI (the default) or llm.APIAnthropic
	BaseURL string
	Model   string
	APIKey  string // from the environment variable named in config; never logged
	// KeyEnv names that variable: named and unset, no call is made.
	KeyEnv  string
	Timeout time.Duration
	Client  *http.Client
	// Log, when set (LLM_LOG=1), receives each call's request and response
	// sections with a call id.
	Log    io.Writer
	Logger hclog.Logger
}

var callSeq atomic.Int64

const systemPrompt = `You turn a user's request into a capflow plan: a JSON object
{"name": "kebab-name", "steps": [{"id": "snake_id", "capability": "domain.action", "with": {...},
 "needs": ["earlier_step_id"], "coverage_confidence": 0.0-1.0, "coverage_rationale": "why this capability covers the step"}]}.
Use ONLY these capabilities; each line gives its name, what it does and the JSON Schema
of its inputs (the step's "with" must satisfy it):
%s
A step may reference an earlier step's output as "${steps.ID.data.FIELD}".
Set coverage_confidence honestly: low when no listed capability truly fits.
Answer with the JSON object only.`

// errRetry marks an answer worth asking again (bad JSON, timeouts, 5xx).
var errRetry = errors.New("retry")

// Plan asks the model for a plan, retrying malformed answers and
// transient failures until maxCalls calls were made.
func (l *LLM) Plan(ctx context.Context, request string, caps []Capability, maxCalls int) (*plan.Plan, string, int, error) {
	if maxCalls <= 0 {
		return nil, "", 0, caperr.New(caperr.PolicyBlocked, "the policy allows no LLM calls (max_llm_calls 0)")
	}
	if l.KeyEnv != "" && l.APIKey == "" {
		return nil, "", 0, caperr.New(caperr.ConfigError, "router.llm: api_key_env names %s, which is not set: set it to the provider's key", l.KeyEnv)
	}
	// One client for the request's calls, each bounded by the timeout
	// (llm says whether the call's time or the caller's ran out).
	client, err := llm.New(llm.Provider{Name: "router.llm", API: l.API, BaseURL: l.BaseURL, Model: l.Model, Timeout: l.timeout()}, l.APIKey, l.Client)
	if err != nil {
		return nil, "", 0, err
	}
	req := llm.Request{System: fmt.Sprintf(systemPrompt, catalogText(caps)), Messages: []llm.Message{{Role: llm.RoleUser, Content: request}}, JSON: true}
	var lastErr error
	for call := 1; call <= maxCalls; call++ {
		p, src, err := l.once(ctx, client, req)
		if err == nil {
			return p, src, call, nil
		}
		lastErr = err
		if !errors.Is(err, errRetry) || ctx.Err() != nil {
			return nil, "", call, unwrapRetry(err)
		}
		l.logf("call retry: %v", err)
	}
	return nil, "", maxCalls, caperr.Wrap(caperr.RetryExhausted, unwrapRetry(lastErr), "the LLM gave no usable plan in %d call(s) (max_llm_calls)", maxCalls)
}

type retryErr struct{ err error }

func (r retryErr) Error() string        { return r.err.Error() }
func (r retryErr) Is(target error) bool { return target == errRetry }
func (r retryErr) Unwrap() error        { return r.err }

func unwrapRetry(err error) error {
	var r retryErr
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

func (l *LLM) logf(format string, args ...any) {
	if l.Log != nil {
		fmt.Fprintf(l.Log, format+"\n", args...)
	}
}

func (l *LLM) once(ctx context.Context, client llm.Client, req llm.Request) (*plan.Plan, string, error) {
	id := fmt.Sprintf("llm-%d", callSeq.Add(1))
	red := envelope.NewRedactor(l.APIKey)
	body, _ := json.Marshal(req)
	l.logf("=== %s request ===\n%s %s model %s\n%s", id, cmp.Or(l.API, llm.APIOpenAI), strings.TrimRight(l.BaseURL, "/"), l.Model, red.Bytes(body))
	res, err := client.Complete(ctx, req)
	if err != nil {
		l.logf("=== %s error ===\n%s", id, red.String(err.Error()))
		return nil, "", l.callError(id, err)
	}
	l.logf("=== %s response ===\n%s", id, red.String(res.Raw))
	return l.planOf(id, res.Text, red)
}

// callError is a failed call's error as the router says it: the caller's
// cancellation (a signal, a cancelled run: CANCELLED, never retried), the
// call's own timeout (TASK_TIMEOUT, worth another call), or the
// provider's, retried when llm says it may be.
func (l *LLM) callError(id string, err error) error {
	switch caperr.CodeOf(err) {
	case caperr.Cancelled:
		return caperr.New(caperr.Cancelled, "LLM call %s cancelled", id)
	case caperr.TaskTimeout:
		return retryErr{caperr.New(caperr.TaskTimeout, "LLM call %s timed out after %s (router.llm.timeout)", id, l.timeout())}
	}
	if llm.Retryable(err) {
		return retryErr{err}
	}
	return err
}

// timeout bounds one call: router.llm.timeout, a minute by default.
func (l *LLM) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return time.Minute
}

// planOf reads a model's answer as a plan: a JSON object, masked, every
// step with a confidence (fail-closed), parsed.
func (l *LLM) planOf(id, text string, red *envelope.Redactor) (*plan.Plan, string, error) {
	// An endpoint may echo the request (the Authorization header with it):
	// the key never reaches the log, the plan or the route's data.
	content := red.String(strings.TrimSpace(text))
	content = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(content, "```json"), "```"), "```")
	l.logf("=== %s extracted content ===\n%s", id, content)
	var v map[string]any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return nil, "", retryErr{caperr.New(caperr.ToolFailure, "LLM call %s: the answer is not a JSON object: %v", id, red.String(err.Error()))}
	}
	v, _ = red.Value(v).(map[string]any) // decoded forms (\u escapes) too
	// Fail closed: a step without a confidence is a step with none.
	if steps, ok := v["steps"].([]any); ok {
		for _, s := range steps {
			if sm, ok := s.(map[string]any); ok {
				if _, has := sm["coverage_confidence"]; !has {
					sm["coverage_confidence"] = 0.0
				}
			}
		}
	}
	if _, ok := v["name"]; !ok {
		v["name"] = "llm-plan"
	}
	js, _ := json.Marshal(v)
	p, probs := plan.Parse(id, js)
	if len(probs) > 0 {
		return nil, "", retryErr{caperr.New(caperr.ToolFailure, "LLM call %s: the plan is invalid: %s", id, probs[0].Error())}
	}
	y, _ := yaml.MarshalWithOptions(v, yaml.IndentSequence(true))
	return p, string(y), nil
}

// Capability is what the LLM is shown of one capability (docs/router.md: the
// schema is presented to the LLM): the chosen provider's description and
// input schema.
type Capability struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema,omitempty"`
}

// maxCatalog bounds the capability list in the prompt.
const maxCatalog = 48 << 10

func catalogText(caps []Capability) string {
	if len(caps) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, c := range caps {
		line := "- " + c.Name
		if c.Description != "" {
			line += ": " + c.Description
		}
		if len(c.InputSchema) > 0 {
			js, _ := json.Marshal(c.InputSchema)
			line += "; inputs " + string(js)
		}
		if b.Len()+len(line) > maxCatalog {
			b.WriteString("- (more capabilities omitted: the list is too long)\n")
			break
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// CatalogOf lists a registry's capabilities for the LLM, each with the
// tool resolution would choose.
func CatalogOf(reg *registry.Registry) func() []Capability {
	return func() []Capability {
		var out []Capability
		for _, c := range reg.Capabilities() {
			res, err := reg.Resolve(c, "")
			if err != nil || res.Chosen == nil {
				continue
			}
			m := res.Chosen.Manifest
			out = append(out, Capability{Name: c, Description: m.Description, InputSchema: m.InputSchema})
		}
		return out
	}
}
