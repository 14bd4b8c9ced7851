package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/wire"
)

// Refusal is one problem of a proposed call, at the argument it names
// ("" for the call as a whole).
type Refusal struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Call is one call of a proposal as compiled.
type Call struct {
	ID         string         `json:"id"`                 // the model's call id
	Step       string         `json:"step"`               // its step in the round's plan
	Function   string         `json:"function,omitempty"` // as the model named it (cut), when it names no capability of the scope
	Capability string         `json:"capability,omitempty"`
	Tool       string         `json:"tool,omitempty"`
	Arguments  map[string]any `json:"arguments,omitempty"`
	Refused    []Refusal      `json:"refused,omitempty"`
	// Risky: its tool is not idempotent or says risk: high.
	Risky bool `json:"risky,omitempty"`
}

// Proposal is one model answer compiled: the calls to run as a plan,
// the finish, or what was refused.
type Proposal struct {
	Calls []Call `json:"calls,omitempty"`
	// Finished: the answer is an accepted finish; Finish is the step's
	// data (maybe empty).
	Finished bool           `json:"finished,omitempty"`
	Finish   map[string]any `json:"finish,omitempty"`
	// Whole refuses the answer as a whole (no call, too many calls, a
	// finish beside other calls): it goes back as a user message.
	Whole string `json:"whole,omitempty"`
	// Plan is the accepted calls as a plan value (a sub-plan of the run);
	// not recorded: the workflow builds it again from the calls (Runnable).
	Plan map[string]any `json:"-"`
	// Approval is the gate an accepted proposal waits at, when one is asked.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is a proposal's gate: its first step, which every call
// needs, shows the compiled calls and the proposal's digest; a person's
// approval of it lets exactly those calls run, once.
type Approval struct {
	Step   string `json:"step"`
	Digest string `json:"digest"`
	Prompt string `json:"prompt"`
}

// Refused reports whether anything of p was refused.
func (p *Proposal) Refused() bool {
	if p.Whole != "" {
		return true
	}
	for _, c := range p.Calls {
		if len(c.Refused) > 0 {
			return true
		}
	}
	return false
}

// Problems lists every refusal of p, one line each, for the report.
func (p *Proposal) Problems() []string {
	var out []string
	if p.Whole != "" {
		out = append(out, p.Whole)
	}
	for _, c := range p.Calls {
		for _, r := range c.Refused {
			out = append(out, fmt.Sprintf("%s %s: %s", c.ID, strings.TrimSpace(c.Capability+" "+r.Field), r.Message))
		}
	}
	return out
}

// Checked is what `plan check` says of a round's plan.
type Checked struct {
	Problems   []wire.Problem
	Gaps       []wire.Gap
	Violations []wire.Violation
	// Tools are the chosen tools by step.
	Tools map[string]Tool
}

// Tool is a step's chosen tool.
type Tool struct {
	Name string // name@version
	// Risky: not idempotent, or risk: high (approve: risky asks a person).
	Risky bool
}

// Options are what a proposal is compiled against.
type Options struct {
	Run    string // the run's workflow ID (a proposal's digest names it)
	Step   string
	Round  int
	Scope  []string
	Output map[string]any // the step's output_schema (nil: any object)
	// MaxCalls bounds a proposal's calls (0: MaxCalls).
	MaxCalls int
	// Policy is the plan's own narrowing of the project's, carried into
	// every round's plan.
	Policy *plan.PolicySpec
	// Check checks a plan as `plan check` does (preflight.Check with the
	// project's registry and policy; activities/agent.go).
	Check func(*plan.Plan) Checked
	// Approve is the step's approve rule (plan.ApproveNever, Risky, Always).
	Approve string
}

// Compile checks answer ans: every call named in scope with arguments
// that are a JSON object, then all of them together as a plan.
func Compile(ans llm.Response, o Options) Proposal {
	max := o.MaxCalls
	if max <= 0 || max > MaxCalls {
		max = MaxCalls
	}
	switch {
	case len(ans.Calls) == 0:
		return Proposal{Whole: "the answer called no function: call the capabilities' functions, or " + Finish + " with the result"}
	case len(ans.Calls) > max:
		return Proposal{Whole: fmt.Sprintf("the answer proposed %d calls; a proposal may hold at most %d: none ran", len(ans.Calls), max)}
	case slices.ContainsFunc(ans.Calls, func(c llm.Call) bool { return len(c.ID) > MaxNameBytes || len(c.Name) > MaxNameBytes }):
		return Proposal{Whole: fmt.Sprintf("a call's id or function name is past %d bytes: none ran", MaxNameBytes)}
	}
	if i := slices.IndexFunc(ans.Calls, func(c llm.Call) bool { return c.Name == Finish }); i >= 0 {
		if len(ans.Calls) > 1 {
			return Proposal{Whole: Finish + " must be the only call of its answer: none ran"}
		}
		return finish(ans.Calls[0], o.Output)
	}
	var p Proposal
	for i, c := range ans.Calls {
		p.Calls = append(p.Calls, precheck(c, "call-"+strconv.Itoa(i+1), o.Scope))
	}
	if p.Refused() {
		return p
	}
	p.Plan = roundPlan(p.Calls, o)
	checkPlan(&p, o)
	if !p.Refused() && (o.Approve == plan.ApproveAlways || (o.Approve != plan.ApproveNever && slices.ContainsFunc(p.Calls, func(c Call) bool { return c.Risky }))) {
		gate(&p, o)
	}
	return p
}

// Runnable builds an accepted proposal's plan (and its gate, when it has
// one) from its calls: what Compile checked, built again where it runs.
func Runnable(p *Proposal, o Options) {
	p.Plan = roundPlan(p.Calls, o)
	if p.Approval != nil {
		gate(p, o)
	}
}

// precheck refuses what needs no plan to refuse: a name out of scope,
// arguments past MaxArgBytes or not a JSON object.
func precheck(c llm.Call, step string, scope []string) Call {
	out := Call{ID: c.ID, Step: step, Capability: CapabilityOf(c.Name)}
	switch {
	case slices.Contains(scope, c.Name):
		out.Refused = append(out.Refused, Refusal{Message: fmt.Sprintf("call it %s: a capability's function writes its dot as __", FunctionName(c.Name))})
		out.Capability, out.Function = "", trimName(c.Name)
	case out.Capability == "" || !slices.Contains(scope, out.Capability):
		out.Refused = append(out.Refused, Refusal{Message: fmt.Sprintf("%q is not a function of this step: its scope is %s", trimName(c.Name), functions(scope))})
		out.Capability, out.Function = "", trimName(c.Name)
	case len(c.Arguments) > MaxArgBytes:
		out.Refused = append(out.Refused, Refusal{Message: fmt.Sprintf("the arguments are %d KB, past the %d KB a call may pass: pass a file's path instead", len(c.Arguments)>>10, MaxArgBytes>>10)})
	default:
		args, err := object(c.Arguments)
		if err != nil {
			out.Refused = append(out.Refused, Refusal{Message: err.Error()})
		}
		out.Arguments = args
	}
	return out
}

// functions are the scope's function names, for the model to call.
func functions(scope []string) string {
	out := make([]string, len(scope))
	for i, c := range scope {
		out[i] = FunctionName(c)
	}
	return strings.Join(out, ", ") + " or " + Finish
}

// trimName bounds a name from the model in messages.
func trimName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func object(raw string) (map[string]any, error) {
	if strings.TrimSpace(raw) == "" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the arguments must be a JSON object")
	}
	return m, nil
}

// finish accepts a finish whose arguments fit the output schema.
func finish(c llm.Call, output map[string]any) Proposal {
	call := Call{ID: c.ID, Step: Finish}
	args, err := object(c.Arguments)
	if err != nil || len(c.Arguments) > MaxArgBytes {
		if err == nil {
			err = fmt.Errorf("the result is %d KB, past the %d KB it may be", len(c.Arguments)>>10, MaxArgBytes>>10)
		}
		call.Refused = []Refusal{{Message: err.Error()}}
		return Proposal{Calls: []Call{call}}
	}
	if output != nil {
		sch, _ := schema.Compile(output)
		for _, v := range sch.Validate(args) {
			call.Refused = append(call.Refused, Refusal{Field: strings.Join(v.Path, "."), Message: v.Message})
		}
	}
	if len(call.Refused) > 0 {
		return Proposal{Calls: []Call{call}}
	}
	return Proposal{Finished: true, Finish: args}
}

// roundPlan is the accepted calls as a plan value: each call a step with
// its arguments as literal inputs ("${" escaped: the model's text is
// never a reference), every call's result wanted (continue_all).
func roundPlan(calls []Call, o Options) map[string]any {
	steps := make([]any, 0, len(calls))
	for _, c := range calls {
		s := map[string]any{"id": c.Step, "capability": c.Capability, "with": escape(c.Arguments)}
		if name, _, _ := strings.Cut(c.Tool, "@"); name != "" {
			s["tool"] = name // the tool checked (and gated) is the tool that runs
		}
		steps = append(steps, s)
	}
	p := map[string]any{"name": fmt.Sprintf("%s-round-%d", o.Step, o.Round), "failure_policy": plan.ContinueAll, "steps": steps}
	if o.Policy != nil {
		b, _ := json.Marshal(o.Policy)
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		p["policy"] = v
	}
	return p
}

// escape writes every "${" of v as "$${", a literal.
func escape(v any) any {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, "${", "$${")
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = escape(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = escape(x)
		}
		return out
	}
	return v
}

// checkPlan checks the round's plan as `plan check` does and gives each
// call its problems, gaps and policy violations.
func checkPlan(p *Proposal, o Options) {
	byStep := map[string]*Call{}
	for i := range p.Calls {
		byStep[p.Calls[i].Step] = &p.Calls[i]
	}
	pl, probs := plan.FromValue(o.Step, p.Plan)
	if len(probs) > 0 {
		for _, pr := range probs {
			refuse(p, byStep, pr.Field, pr.Message)
		}
		return
	}
	rep := o.Check(pl)
	for _, pr := range rep.Problems {
		refuse(p, byStep, pr.Field, pr.Message)
	}
	for _, g := range rep.Gaps {
		refuse(p, byStep, "steps."+g.StepID, g.ReasonMessage)
	}
	for _, v := range rep.Violations {
		refuse(p, byStep, "steps."+v.StepID, v.Message)
	}
	for id, t := range rep.Tools {
		if c := byStep[id]; c != nil {
			c.Tool, c.Risky = t.Name, t.Risky
		}
	}
	if p.Refused() {
		p.Plan = nil
	}
}

// refuse gives the call a field names (steps[i].with.x or steps.ID) its
// problem; a problem of no call is every call's.
func refuse(p *Proposal, byStep map[string]*Call, field, msg string) {
	step, arg := callOf(field)
	if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(p.Calls) {
		step = p.Calls[i].Step
	}
	if c := byStep[step]; c != nil {
		c.Refused = append(c.Refused, Refusal{Field: arg, Message: msg})
		return
	}
	for i := range p.Calls {
		p.Calls[i].Refused = append(p.Calls[i].Refused, Refusal{Field: arg, Message: msg})
	}
}

// callOf splits a problem's field into its step (an index or an ID) and
// the argument it names.
func callOf(field string) (step, arg string) {
	rest, ok := strings.CutPrefix(field, "steps")
	if !ok {
		return "", ""
	}
	rest = strings.TrimPrefix(rest, ".")
	if strings.HasPrefix(rest, "[") {
		idx, after, _ := strings.Cut(rest[1:], "]")
		step, rest = idx, strings.TrimPrefix(after, ".")
	} else {
		step, rest, _ = strings.Cut(rest, ".")
	}
	rest = strings.TrimPrefix(rest, "with")
	return step, strings.TrimPrefix(rest, ".")
}
