package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/capflow/capflow/internal/agent"
	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// maxConversation bounds a conversation loaded from the store.
const maxConversation = 64 << 20

// AgentTurn is one round of an agent step (docs/agents.md): the
// conversation so far (the artifact store's, by digest) and the last
// round's results go to the model, unless a budget could pass; the answer
// is compiled by the checks of `plan check`. The request and the answer
// are stored by digest; history keeps the digests, the model, the tokens
// and the cost. An answer recorded for an identical request (this
// turn's earlier attempt, or a rerun's earlier run) is reused, not asked
// again.
func (a *Activities) AgentTurn(ctx context.Context, in wfapi.TurnInput) (*wfapi.TurnResult, error) {
	store := a.Exec.Artifacts
	if store == nil {
		return nil, appError(caperr.New(caperr.ConfigError, "an agent step needs the artifact store (artifacts.url)"))
	}
	reg, pol, err := a.checker()
	if err != nil {
		return nil, appError(err)
	}
	conv, err := loadConversation(ctx, store, in)
	if err != nil {
		return nil, appError(err)
	}
	set := conv.Setup
	prov, client, err := a.model(set, in.Round)
	if err != nil {
		return nil, appError(err)
	}
	req := llm.Request{System: agent.System(set.Step), Messages: conv.Messages, Tools: agent.Tools(scopeOf(reg, set.Agent.Capabilities), set.Agent.OutputSchema)}
	raw, _ := json.Marshal(req)
	// This turn's failed tries were calls too (a provider bills a timeout).
	spent, tried := in.Spent, triesBefore(ctx)
	spent.LLMCalls += tried
	if breach := reserve(&req, len(raw), set.Agent.Budget, in.Grant, spent, prov.Price); breach != "" {
		return &wfapi.TurnResult{Breach: breach, Calls: tried}, nil
	}
	out, res, err := a.ask(ctx, store, conv.Setup, in.Round, prov, client, req)
	if err != nil {
		return nil, appError(err)
	}
	out.Calls = tried + 1
	out.Proposal = agent.Compile(res, agent.Options{Run: set.Run, Step: set.Step, Round: in.Round, Scope: set.Agent.Capabilities, Output: set.Agent.OutputSchema,
		MaxCalls: pol.Limits["max_steps"], Policy: set.Agent.Policy, Approve: set.Agent.Approve,
		Check: func(p *plan.Plan) agent.Checked { return checked(a.Project.Check(p, nil, reg, pol, false)) }})
	conv.Messages = agent.Answered(conv.Messages, res, out.Proposal)
	if out.Conversation, err = putJSON(ctx, store, conv); err != nil {
		return nil, appError(err)
	}
	return out, nil
}

// ask stores the request, gets its answer (recorded, or the model's) and
// stores that: a turn's result but its proposal and conversation. A
// reused answer counts as spent: the step's budget is its conversation's,
// whichever run paid for it.
func (a *Activities) ask(ctx context.Context, store *artifacts.Store, set wfapi.AgentInput, round int, prov llm.Provider, client llm.Client, req llm.Request) (*wfapi.TurnResult, llm.Response, error) {
	raw, _ := json.Marshal(req)
	digest, err := store.Put(ctx, raw)
	if err != nil {
		return nil, llm.Response{}, caperr.Wrap(caperr.ObservabilityError, err, "cannot store the model request")
	}
	res, reused, err := a.answer(ctx, store, set, round, digest, prov, client, req)
	if err != nil {
		return nil, res, err
	}
	body, _ := json.Marshal(res)
	if u := res.Usage; u.InputTokens+u.OutputTokens == 0 || u.InputTokens < 0 || u.OutputTokens < 0 {
		// No usage said (or nonsense): counted as reserve counts, a token
		// per 3 bytes.
		res.Usage = llm.Usage{InputTokens: int64(len(raw)/3 + 1), OutputTokens: int64(len(body)/3 + 1)}
	}
	out := &wfapi.TurnResult{Request: digest, CallID: bounded(res.ID), Model: bounded(res.Model), Usage: res.Usage, Reused: reused, USD: prov.Price.Cost(res.Usage)}
	if out.Response, err = store.Put(ctx, body); err != nil {
		return nil, res, caperr.Wrap(caperr.ObservabilityError, err, "cannot store the model answer")
	}
	return out, res, nil
}

func putJSON(ctx context.Context, store *artifacts.Store, v any) (string, error) {
	b, _ := json.Marshal(v)
	d, err := store.Put(ctx, b)
	if err != nil {
		return "", caperr.Wrap(caperr.ObservabilityError, err, "cannot store the conversation")
	}
	return d, nil
}

// loadConversation is the conversation so far with the last round's
// results; the first round's is its setup and goal.
func loadConversation(ctx context.Context, store *artifacts.Store, in wfapi.TurnInput) (wfapi.Conversation, error) {
	if in.Conversation == "" {
		if in.Setup == nil {
			return wfapi.Conversation{}, caperr.New(caperr.InvalidInput, "round %d names no conversation and carries no setup", in.Round)
		}
		return wfapi.Conversation{Setup: *in.Setup, Messages: []llm.Message{{Role: llm.RoleUser, Content: in.Setup.Goal}}}, nil
	}
	var conv wfapi.Conversation
	b, err := store.Get(ctx, in.Conversation, maxConversation)
	if err != nil {
		return conv, caperr.Wrap(caperr.ObservabilityError, err, "cannot load the conversation sha256:%s", in.Conversation)
	}
	if err := json.Unmarshal(b, &conv); err != nil {
		return conv, caperr.Wrap(caperr.ObservabilityError, err, "the stored conversation sha256:%s is not JSON", in.Conversation)
	}
	conv.Messages = append(conv.Messages, in.Results...)
	return conv, nil
}

// scopeOf is each capability of the scope as its chosen tool offers it
// (a capability no tool provides is offered with no schema: its calls are
// refused as gaps).
func scopeOf(reg *registry.Registry, caps []string) []agent.Capability {
	out := make([]agent.Capability, 0, len(caps))
	for _, c := range caps {
		ac := agent.Capability{Name: c}
		if r, err := reg.Resolve(c, ""); err == nil {
			ac.Description, ac.InputSchema = r.Chosen.Manifest.Description, r.Chosen.Manifest.InputSchema
		}
		out = append(out, ac)
	}
	return out
}

// reserve bounds the call so that no budget can pass: a call is made
// only when one more fits, and its answer's tokens are what is left
// after the request (counted high: a token per 3 bytes). It names the
// budget that leaves no room.
func reserve(req *llm.Request, reqBytes int, b plan.Budget, g int, sp wfapi.Spent, price llm.Price) string {
	if g > 0 && b.LLMCalls > 0 {
		// A person's grant: one more call and its share of each budget.
		b.Tokens += g * b.Tokens / b.LLMCalls
		b.USD += float64(g) * b.USD / float64(b.LLMCalls)
		b.LLMCalls += g
	}
	if sp.LLMCalls+1 > b.LLMCalls {
		return fmt.Sprintf("llm_calls: %d of %d spent", sp.LLMCalls, b.LLMCalls)
	}
	input := int64(reqBytes/3 + 1)
	room := int64(llm.DefaultMaxTokens)
	if b.Tokens > 0 {
		room = min(room, int64(b.Tokens)-sp.Tokens-input)
		if room < minAnswer {
			return fmt.Sprintf("tokens: %d of %d spent, and the next request is about %d", sp.Tokens, b.Tokens, input)
		}
	}
	if b.USD > 0 && price.OutputPerMTok+price.InputPerMTok > 0 {
		left := b.USD - sp.USD - float64(input)*price.InputPerMTok/1e6
		if price.OutputPerMTok > 0 {
			room = min(room, int64(left*1e6/price.OutputPerMTok))
		}
		if room < minAnswer || left <= 0 {
			return fmt.Sprintf("usd: %.4f of %.4f spent, and the next request costs about %.4f", sp.USD, b.USD, float64(input)*price.InputPerMTok/1e6)
		}
	}
	req.MaxTokens = room
	return ""
}

// minAnswer is the fewest tokens a call may answer in.
const minAnswer = 256

// answer is the model's answer to req: recorded for this request (by
// this run, or the run it reruns), or asked now and recorded.
func (a *Activities) answer(ctx context.Context, store *artifacts.Store, set wfapi.AgentInput, round int, digest string, prov llm.Provider, client llm.Client, req llm.Request) (llm.Response, bool, error) {
	for _, run := range []string{set.Run, set.ReuseFrom} {
		if run == "" {
			continue
		}
		if b, err := store.GetRecord(ctx, answerRecord(run, set.Step, digest), maxConversation); err == nil {
			var res llm.Response
			if json.Unmarshal(b, &res) == nil {
				return res, true, nil
			}
		}
	}
	a.llmLogf("=== %s round %d request sha256:%s (%s model %s) ===", set.Step, round, digest, prov.Name, prov.Model)
	stop := heartbeatWhile(ctx, fmt.Sprintf("round %d: waiting for %s", round, prov.Name))
	res, err := client.Complete(ctx, req)
	stop()
	if err != nil {
		a.llmLogf("=== %s round %d error ===\n%s", set.Step, round, err)
		return res, false, err
	}
	a.llmLogf("=== %s round %d response %s ===\n%s", set.Step, round, res.ID, res.Raw)
	b, _ := json.Marshal(res)
	if err := store.PutRecord(ctx, answerRecord(set.Run, set.Step, digest), b); err != nil {
		return res, false, caperr.Wrap(caperr.ObservabilityError, err, "cannot record the model answer")
	}
	return res, false, nil
}

// answerRecord names the answer a run's step got for a request.
func answerRecord(run, step, digest string) string {
	return "agent/" + runfolder.Name(run) + "/" + step + "/" + digest
}

// model is the step's provider and its client: capflow.yaml's provider
// over its SDK, its key from the environment and redacted from what the
// client says (llm.Redacting), or the stand-in a plan test gives.
func (a *Activities) model(set wfapi.AgentInput, round int) (llm.Provider, llm.Client, error) {
	name := set.Agent.Model
	p, ok := a.Project.Config.LLM[name]
	if a.Model != nil {
		return llm.Provider{Name: name, Model: p.Model}, a.Model(set.Step, round), nil
	}
	if !ok {
		return llm.Provider{}, nil, caperr.New(caperr.ConfigError, "model %q is not a provider of capflow.yaml's llm: section", name)
	}
	timeout, err := p.TimeoutOf("llm." + name)
	if err != nil {
		return llm.Provider{}, nil, err
	}
	key := ""
	if p.APIKeyEnv != "" {
		if key = os.Getenv(p.APIKeyEnv); key == "" {
			return llm.Provider{}, nil, caperr.New(caperr.ConfigError, "llm.%s.api_key_env names %s, which is not set in the worker's environment", name, p.APIKeyEnv)
		}
	}
	prov := llm.Provider{Name: name, API: p.API, BaseURL: p.BaseURL, Model: p.Model, Timeout: cmp.Or(timeout, time.Minute),
		Price: llm.Price{InputPerMTok: p.Price.InputPerMTok, OutputPerMTok: p.Price.OutputPerMTok}}
	client, err := llm.New(prov, key, nil)
	if err != nil {
		return prov, nil, err
	}
	return prov, llm.Redacting(client, key), nil
}

// llmLogf writes LLM_LOG=1's lines to the worker's log stream.
func (a *Activities) llmLogf(format string, args ...any) {
	if os.Getenv("LLM_LOG") == "1" && a.Logger != nil {
		a.Logger.Named("llm").Info(fmt.Sprintf(format, args...))
	}
}

// checked is what an agent's compilation needs of a plan's report.
func checked(rep *preflight.Report) agent.Checked {
	c := agent.Checked{Problems: rep.Problems, Gaps: rep.Gaps, Violations: rep.Policy.Violations, Tools: map[string]agent.Tool{}}
	for _, r := range rep.Resolution {
		if m := r.Manifest; m != nil {
			c.Tools[r.StepID] = agent.Tool{Name: m.Name + "@" + m.Version, Risky: m.Risky()}
		}
	}
	return c
}

// turnBeat is how often a turn heartbeats while its model answers: a
// worker that dies mid-call is seen within the turn's heartbeat timeout,
// not its start-to-close.
const turnBeat = 2 * time.Second

// heartbeatWhile heartbeats what until stop is called.
func heartbeatWhile(ctx context.Context, what string) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go every(turnBeat, done, func() bool { activity.RecordHeartbeat(ctx, what); return true })
	return func() { close(done) }
}

// bounded cuts a name an endpoint gave (an answer's id, its model) to
// what history keeps of it.
func bounded(s string) string { return s[:min(len(s), 128)] }

// triesBefore is how many tries of this turn failed before this one.
func triesBefore(ctx context.Context) int {
	if !activity.IsActivity(ctx) {
		return 0
	}
	return int(activity.GetInfo(ctx).Attempt) - 1
}
