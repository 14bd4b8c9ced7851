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

// maxPrompt bounds the gate's prompt.
const maxPrompt = 4 << 10

// Digest is a proposal's digest: its calls' capabilities, tools and
// arguments, in order.
func Digest(calls []Call) string {
	type named struct {
		Capability string         `json:"capability"`
		Tool       string         `json:"tool"`
		Arguments  map[string]any `json:"arguments"`
	}
	v := make([]named, len(calls))
	for i, c := range calls {
		v[i] = named{c.Capability, c.Tool, c.Arguments}
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// gate puts a flow.approve step before every call of p's plan: the calls
// run only once a person approves the proposal it shows, by digest.
func gate(p *Proposal, o Options) {
	d := Digest(p.Calls)
	var b strings.Builder
	fmt.Fprintf(&b, "agent step %s, round %d, proposes (sha256:%s):", o.Step, o.Round, d[:16])
	for _, c := range p.Calls {
		fmt.Fprintf(&b, "\n  %s %s (%s) %s", c.Step, c.Capability, c.Tool, Shown(c.Arguments))
	}
	prompt := b.String()
	if len(prompt) > maxPrompt {
		prompt = prompt[:maxPrompt] + "\n  … (the round's plan lists every call)"
	}
	prompt += "\napprove these calls?"
	p.Approval = &Approval{Step: ApprovalStep, Digest: d, Prompt: prompt}
	steps := p.Plan["steps"].([]any)
	for _, s := range steps {
		s.(map[string]any)["needs"] = []any{ApprovalStep}
	}
	gateStep := map[string]any{"id": ApprovalStep, "capability": "flow.approve", "with": map[string]any{"prompt": strings.ReplaceAll(prompt, "${", "$${")}}
	p.Plan["steps"] = append([]any{gateStep}, steps...)
}
