package mcpserver

import "fmt"

// toolDef is one tool: its schema and the capflow command it runs.
type toolDef struct {
	name, description, input string
	readOnly                 bool
	command                  func(h *handlers, a args) ([]string, error)
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
		input:       `{"type": "object", "required": ["text"], "additionalProperties": false, "properties": {"text": {"type": "string", "minLength": 1, "description": "the request"}}}`,
		command:     func(_ *handlers, a args) ([]string, error) { return []string{"route", a.Text}, nil }},
	{name: "plan_check", readOnly: true,
		description: "Check a plan before it runs: every step resolved to a tool, schemas and data flow, policy; gaps say what is missing. Nothing runs.",
		input:       `{"type": "object", "required": ["plan"], "additionalProperties": false, "properties": {` + planArg + `}}`,
		command: func(h *handlers, a args) ([]string, error) {
			return h.planCommand([]string{"plan", "check"}, a)
		}},
	{name: "run",
		description: "Run a plan durably on Temporal. wait: false (default) answers with the run's ID at once; wait: true answers when it ends (progress notifications while it runs). A run waiting for an approval is answered with decide.",
		input:       `{"type": "object", "required": ["plan"], "additionalProperties": false, "properties": {` + planArg + `, "wait": {"type": "boolean", "default": false}}}`,
		command: func(h *handlers, a args) ([]string, error) {
			cmd, err := h.planCommand([]string{"run"}, a)
			if err == nil && !a.Wait {
				cmd = append(cmd, "--detach")
			}
			return cmd, err
		}},
	{name: "status", readOnly: true,
		description: "A run's progress, or its result once it ended: every step's state, waiting steps and what they wait for.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     func(_ *handlers, a args) ([]string, error) { return []string{"status", a.ID}, nil }},
	{name: "decide",
		description: "Answer a waiting step: approve or reject a flow.approve step; retry, skip or fail a step waiting after its failure.",
		input: `{"type": "object", "required": ["id", "step", "action"], "additionalProperties": false, "properties": {` + idArg + `,
			"step": {"type": "string", "minLength": 1}, "action": {"enum": ["approve", "reject", "retry", "skip", "fail"]}, "comment": {"type": "string"}}}`,
		command: decideCommand},
	{name: "cancel",
		description: "Cancel a run: running tools are stopped, the run ends cancelled with its report.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     func(_ *handlers, a args) ([]string, error) { return []string{"cancel", a.ID}, nil }},
	{name: "report", readOnly: true,
		description: "An ended run's result and where its JSON and markdown report are.",
		input:       `{"type": "object", "required": ["id"], "additionalProperties": false, "properties": {` + idArg + `}}`,
		command:     func(_ *handlers, a args) ([]string, error) { return []string{"report", a.ID}, nil }},
}

func (h *handlers) planCommand(cmd []string, a args) ([]string, error) {
	file, err := h.planFile(a.Plan)
	if err != nil {
		return nil, err
	}
	in, err := h.inputsFile(a.Inputs)
	if err != nil {
		return nil, err
	}
	return append(append(cmd, file), in...), nil
}

func decideCommand(h *handlers, a args) ([]string, error) {
	if a.ID == "" || a.Step == "" {
		return nil, fmt.Errorf("decide needs id and step")
	}
	by := []string{"--by", h.o.By}
	if a.Comment != "" {
		by = append(by, "--comment", a.Comment)
	}
	switch a.Action {
	case "approve":
		return append([]string{"approve", a.ID, a.Step}, by...), nil
	case "reject":
		return append([]string{"approve", a.ID, a.Step, "--reject"}, by...), nil
	case "retry", "skip", "fail":
		return append([]string{a.Action, a.ID, a.Step}, by...), nil
	}
	return nil, fmt.Errorf("action %q: approve, reject, retry, skip or fail", a.Action)
}
