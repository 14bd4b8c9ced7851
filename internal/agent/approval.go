package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// ApprovalStep is the gate's step in a round's plan.
const ApprovalStep = "approve"

// maxPrompt is what the gate's prompt gives the calls' arguments in all:
// each call is shown, its arguments cut to its share (maxShown at least).
const maxPrompt = 4 << 10

// Digest is a proposal's digest: the run, step and round it was made in
// (the same calls proposed again are another proposal, approved again),
// and its calls' capabilities, tools and arguments, in order.
func Digest(run, step string, round int, calls []Call) string {
	type named struct {
		Capability string         `json:"capability"`
		Tool       string         `json:"tool"`
		Arguments  map[string]any `json:"arguments"`
	}
	v := make([]named, len(calls))
	for i, c := range calls {
		v[i] = named{c.Capability, c.Tool, c.Arguments}
	}
	b, _ := json.Marshal(map[string]any{"run": run, "step": step, "round": round, "calls": v})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// gate puts a flow.approve step before every call of p's plan: the calls
// run only once a person approves the proposal it shows, by digest.
func gate(p *Proposal, o Options) {
	d := Digest(o.Run, o.Step, o.Round, p.Calls)
	var b strings.Builder
	fmt.Fprintf(&b, "agent step %s, round %d, proposes (sha256:%s):", o.Step, o.Round, d[:16])
	share := max(maxShown, maxPrompt/max(1, len(p.Calls)))
	for _, c := range p.Calls {
		args := Shown(c.Arguments)
		if len(args) > share {
			args = fmt.Sprintf("%s…(%d bytes of arguments)", args[:share], len(args))
		}
		fmt.Fprintf(&b, "\n  %s %s (%s) %s", c.Step, c.Capability, c.Tool, args)
	}
	prompt := b.String() + "\napprove these calls?"
	p.Approval = &Approval{Step: ApprovalStep, Digest: d, Prompt: prompt}
	steps := p.Plan["steps"].([]any)
	for _, s := range steps {
		s.(map[string]any)["needs"] = []any{ApprovalStep}
	}
	gateStep := map[string]any{"id": ApprovalStep, "capability": "flow.approve", "with": map[string]any{"prompt": strings.ReplaceAll(prompt, "${", "$${")}}
	p.Plan["steps"] = append([]any{gateStep}, steps...)
}
