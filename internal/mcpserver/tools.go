package mcpserver

import (
	"fmt"
	"strings"
)

// toolDef is one tool: its schema and the capflow command it runs.
type toolDef struct {
	name, description, input string
	readOnly                 bool
	command                  func(h *handlers, a args) (call, error)
}

// call is a capflow command built from an MCP call's arguments, never by
// splicing them into flags: flags are the server's own (or flag=value
// pairs whose value cannot be read as another flag), and every value from
// the client is a positional after "--" (argv, the command line).
type call struct {
	cmd   []string // the command's words: "plan", "check"
	flags []string // --name=value, values the server wrote or checked
	pos   []string // the client's values, as data
}

func (c call) argv(extra []string) []string {
	out := append(append(append([]string(nil), c.cmd...), c.flags...), extra...)
	return append(append(out, "--"), c.pos...)
}

// name checks a run ID or step ID from the client: something that reads
// as a flag, or holds a line break, is refused (and would be data anyway).
func name(field, v string) (string, error) {
	switch {
	case v == "":
		return "", fmt.Errorf("%s is empty", field)
	case strings.HasPrefix(v, "-"):
		return "", fmt.Errorf("%s %q starts with \"-\": no run or step ID does", field, v)
	case strings.ContainsAny(v, "\x00\n\r"):
		return "", fmt.Errorf("%s %q holds a control character", field, v)
	}
	return v, nil
}

// byID is the call of a command that takes one run ID.
func byID(cmd string) func(*handlers, args) (call, error) {
	return func(_ *handlers, a args) (call, error) {
		id, err := name("id", a.ID)
		return call{cmd: []string{cmd}, pos: []string{id}}, err
	}
}

const planArg = `"plan": {"description": "a plan file's path in the project, or a plan object (docs/plans.md)", "type": ["string", "object"]},
	"inputs": {"type": "object", "description": "the plan's inputs by name"}`

const idArg = `"id": {"type": "string", "minLength": 1, "description": "the run's workflow ID"}`

// envelopeSchema is the result envelope's shape (docs/tool-protocol.md).
const envelopeSchema = `{"type": "object", "required": ["toolId", "exitCode", "success", "message", "feedback"],
	"properties": {"toolId": {"type": "string"}, "exitCode": {"type": "integer"}, "success": {"type": "boolean"},
	"message": {"type": "string"}, "timestamp": {"type": "string"}, "feedback": {"type": "array"}, "data": {},
	"error": {"type": "object", "properties": {"code": {"type": "string"}, "severity": {"type": "string"}, "retryable": {"type": "boolean"}}}}}`

var tools = []toolDef{
	{name: "route", readOnly: true,
		description: "Turn a request in plain words into a capflow plan (the project's rules, then its LLM if configured); nothing runs.",
		input:       `{"type": "object", "required": ["text"], "additionalProperties": false, "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "the request"}}}`,
		command:     routeCommand},
	{name: "plan_check", readOnly: true,
		description: "Check a plan before it runs: every step resolved to a tool, schemas and data flow, policy; gaps say what is missing. Nothing runs.",
		input:       `{"type": "object", "required": ["plan"], "additionalProperties": false, "properties": {` + planArg + `}}`,
		command: func(h *handlers, a args) (call, error) {
			return h.planCommand([]string{"plan", "check"}, a)
		}},
	{name: "run",
		description: "Run a plan durably on Temporal. wait: false (default) answers with the run's ID at once; wait: true answers when it ends (progress notifications while it runs). A run waiting for an approval is answered with decide.",
		input:       `{"type": "object", "required": ["plan"], "additionalProperties": false, "properties": {` + planArg + `, "wait": {"type": "boolean", "default": false}}}`,
		command: func(h *handlers, a args) (call, error) {
			c, err := h.planCommand([]string{"run"}, a)
			if !a.Wait {
				c.flags = append(c.flags, "--detach")
			}
			return c, err
		}},
	{name: "status", readOnly: true,
		description: "A run's progress, or its result once it ended: every step's state, waiting steps and what they wait for.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     byID("status")},
	{name: "decide",
		description: "Answer a waiting step: approve or reject a flow.approve step; retry, skip or fail a step waiting after its failure.",
		input: `{"type": "object", "required": ["id", "step", "action"], "additionalProperties": false, "properties": {` + idArg + `,
			"step": {"type": "string", "minLength": 1}, "action": {"enum": ["approve", "reject", "retry", "skip", "fail"]}, "comment": {"type": "string"},
			"proposal": {"type": "string", "pattern": "^[0-9a-f]{12,64}$", "description": "an agent step's gate: the digest of the proposal approved or rejected, as its prompt shows it"}}}`,
		command: decideCommand},
	{name: "cancel",
		description: "Cancel a run: running tools are stopped, the run ends cancelled with its report.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     byID("cancel")},
	{name: "report", readOnly: true,
		description: "An ended run's result and where its JSON and markdown report are.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     byID("report")},
}

func (h *handlers) planCommand(cmd []string, a args) (call, error) {
	file, err := h.planFile(a.Plan)
	if err != nil {
		return call{}, err
	}
	in, err := h.inputsFile(a.Inputs)
	if err != nil {
		return call{}, err
	}
	return call{cmd: cmd, flags: in, pos: []string{file}}, nil
}

func decideCommand(h *handlers, a args) (call, error) {
	id, err := name("id", a.ID)
	if err != nil {
		return call{}, fmt.Errorf("decide needs id and step: %w", err)
	}
	step, err := name("step", a.Step)
	if err != nil {
		return call{}, fmt.Errorf("decide needs id and step: %w", err)
	}
	// flag=value: a comment that reads as a flag stays the comment.
	flags := []string{"--by=" + h.o.By}
	if a.Comment != "" {
		flags = append(flags, "--comment="+a.Comment)
	}
	if a.Proposal != "" && (a.Action == "approve" || a.Action == "reject") {
		flags = append(flags, "--proposal="+a.Proposal)
	}
	switch a.Action {
	case "approve":
		return call{cmd: []string{"approve"}, flags: flags, pos: []string{id, step}}, nil
	case "reject":
		return call{cmd: []string{"approve"}, flags: append([]string{"--reject"}, flags...), pos: []string{id, step}}, nil
	case "retry", "skip", "fail":
		return call{cmd: []string{a.Action}, flags: flags, pos: []string{id, step}}, nil
	}
	return call{}, fmt.Errorf("action %q: approve, reject, retry, skip or fail", a.Action)
}

// MaxRequest bounds a request text (the router's matching is not free:
// 9 MB took 24 s of CPU).
const MaxRequest = 64 << 10

func routeCommand(_ *handlers, a args) (call, error) {
	if len(a.Text) > MaxRequest {
		return call{}, fmt.Errorf("text is %d bytes: a request is at most %d", len(a.Text), MaxRequest)
	}
	return call{cmd: []string{"route"}, pos: []string{a.Text}}, nil
}
