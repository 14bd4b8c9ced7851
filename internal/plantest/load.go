package plantest

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/capflow/capflow/internal/agent"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/projfile"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// LoadCases reads a case file for s's plan. Every fault is a problem with
// the file, line and field: the file's shape (schemas/plan-test.schema.json),
// step ids the plan does not have, data its tool's output schema refuses,
// unknown error codes.
func (s *Suite) LoadCases(file string) ([]*Case, error) {
	// Beneath its folder: a case file linked out of it is refused unread.
	data, err := projfile.ReadIn(filepath.Dir(file), file, file)
	if err != nil {
		return nil, err
	}
	doc, err := yamldoc.Parse(file, data)
	if err != nil {
		return nil, err
	}
	if doc.Root.Kind != yamldoc.Map {
		return nil, caperr.New(caperr.InvalidInput, "a case file is a mapping with cases: [...]").At(file, doc.Root.Pos.Line, doc.Root.Pos.Column, "")
	}
	l := &loader{s: s, file: file, root: doc.Root, names: map[string]bool{}}
	sch := schema.Embedded("plan-test.schema.json", schemas.Must("plan-test.schema.json"))
	for _, v := range sch.Validate(doc.Root.Interface()) {
		l.problem(v.Path, "%s", v.Message)
	}
	if len(l.probs) > 0 {
		l.probs.Sort()
		return nil, l.probs
	}
	var cases []*Case
	for i, n := range doc.Root.Get("cases").Items {
		cases = append(cases, l.caseAt(i, n))
	}
	if len(l.probs) > 0 {
		l.probs.Sort()
		return nil, l.probs
	}
	return cases, nil
}

type loader struct {
	s     *Suite
	file  string
	root  *yamldoc.Node
	probs caperr.Problems
	names map[string]bool
}

func (l *loader) problem(path []string, format string, args ...any) {
	p := l.root.PosOf(path)
	l.probs = append(l.probs, caperr.New(caperr.InvalidInput, format, args...).At(l.file, p.Line, p.Column, yamldoc.FieldPath(path)))
}

var (
	itemKey = regexp.MustCompile(`^(.+)\[([0-9]+)\]$`)
	stepKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\[[0-9]+\])?$`)
)

// caseAt reads the valid-shaped case i and checks it against the plan.
func (l *loader) caseAt(i int, n *yamldoc.Node) *Case {
	at := []string{"cases", strconv.Itoa(i)}
	c := &Case{Name: n.Get("name").Interface().(string), Steps: map[string]Given{}, Line: n.Pos.Line}
	if l.names[c.Name] {
		l.problem(append(at, "name"), "another case is named %q: names tell cases apart in results, coverage and JUnit", c.Name)
	}
	l.names[c.Name] = true
	if in := n.Get("inputs"); in != nil {
		c.Inputs, _ = in.Interface().(map[string]any)
		_, _, probs := l.s.Plan.ResolveInputs(c.Inputs, false)
		for _, p := range probs {
			l.problem(append(at, "inputs", p.Field), "%s", p.Message)
		}
	}
	if steps := n.Get("steps"); steps != nil {
		for _, k := range steps.Keys {
			if !stepKey.MatchString(k.Name) {
				l.problem(append(at, "steps", k.Name), "%q is not a step id, or id[i] for item i of a for_each step", k.Name)
				continue
			}
			c.Steps[k.Name] = l.given(append(at, "steps", k.Name), k.Name, k.Value)
		}
	}
	if ex := n.Get("expect"); ex != nil {
		c.Expect = l.expect(append(at, "expect"), ex)
	}
	return c
}

// given reads what a step answers, checking its id, its data and its code.
func (l *loader) given(path []string, key string, n *yamldoc.Node) Given {
	id, item := key, false
	if m := itemKey.FindStringSubmatch(key); m != nil {
		id, item = m[1], true
	}
	step := l.s.Plan.Step(id)
	switch {
	case step == nil:
		l.problem(path, "the plan has no step %q%s", id, suggest.Phrase(id, l.s.stepIDs()))
	case item && !step.IsForEach():
		l.problem(path, "%s is not a for_each step: it has no items", id)
	}
	var g Given
	if d := n.Get("data"); d != nil {
		g.Data, g.HasData = d.Interface(), true
		if sch := l.s.schemas[id]; sch != nil {
			for _, v := range sch.Validate(g.Data) {
				l.problem(append(append(path, "data"), v.Path...), "%s (the output schema of %s's tool)", v.Message, id)
			}
		}
	}
	if e := n.Get("error"); e != nil {
		m := e.Interface().(map[string]any)
		g.Error = &GivenError{Code: m["code"].(string)}
		g.Error.Message, _ = m["message"].(string)
		l.knownCode(append(path, "error", "code"), g.Error.Code)
	}
	if d := n.Get("decision"); d != nil {
		m := d.Interface().(map[string]any)
		g.Decision = &GivenDecision{}
		if a, ok := m["approved"].(bool); ok {
			g.Decision.Approved = &a
		}
		g.Decision.Action, _ = m["action"].(string)
		g.Decision.By, _ = m["by"].(string)
		g.Decision.Comment, _ = m["comment"].(string)
		if step != nil {
			l.checkDecision(append(path, "decision"), step, g.Decision, item)
		}
	}
	if m := n.Get("model"); m != nil {
		g.Model = l.modelAnswers(append(path, "model"), step, m)
	}
	if step != nil && step.Agent != nil && (g.HasData || g.Error != nil) {
		l.problem(path, "%s is an agent step: give its model's answers (model: [...]); its data is its finish call's", id)
	}
	if step != nil && step.Plan != "" && (g.HasData || g.Error != nil) {
		l.problem(path, "%s is a sub-plan step: its child plan runs, its steps answering with their generated results; a case cannot give its data or error", id)
	}
	if g.HasData && g.Error != nil {
		l.problem(path, "%s has both data and an error: a step either succeeds or fails", key)
	}
	return g
}

// checkDecision refuses a decision the step would never read: on a step
// that never waits, of the wrong kind, or saying nothing.
func (l *loader) checkDecision(path []string, step *plan.Step, d *GivenDecision, item bool) {
	approve := l.s.waitsForPerson(step.ID)
	switch {
	case item:
		l.problem(path, "items do not wait for people: give the decision on %s itself", step.ID)
	case !approve && step.OnFailure != "ask" && l.s.Plan.FailurePolicy != plan.BySeverity && step.Agent == nil:
		l.problem(path, "%s never waits for a person (it is not a flow.approve step, has no on_failure: ask, and the plan is not failure_policy: by_severity, where a HIGH failure waits): this decision would never be read", step.ID)
	case d.Approved == nil && d.Action == "":
		l.problem(path, "a decision says approved: true|false (flow.approve) or action: retry|skip|fail")
	case approve && d.Approved == nil && d.Action != "approve" && d.Action != "reject":
		l.problem(path, "%s is a flow.approve step: its decision is approved: true|false", step.ID)
	case !approve && (d.Approved != nil || d.Action == "approve" || d.Action == "reject"):
		l.problem(path, "%s waits after a failure (on_failure: ask): its decision is action: retry|skip|fail", step.ID)
	}
}

// expect reads a case's expectations, checking the step ids and output
// names it uses.
func (l *loader) expect(path []string, n *yamldoc.Node) Expect {
	m := n.Interface().(map[string]any)
	var e Expect
	e.Status, _ = m["status"].(string)
	if steps, ok := m["steps"].(map[string]any); ok {
		e.Steps = map[string]string{}
		for id, st := range steps {
			e.Steps[id] = st.(string)
			l.knownStep(append(path, "steps", id), id)
		}
	}
	if outs, ok := m["outputs"].(map[string]any); ok {
		e.Outputs = outs
		for name := range outs {
			if _, ok := l.s.Plan.Outputs[name]; !ok {
				l.problem(append(path, "outputs", name), "the plan has no output %q%s", name, suggest.Phrase(name, slices.Sorted(maps.Keys(l.s.Plan.Outputs))))
			}
		}
	}
	if next, ok := m["next"].(map[string]any); ok {
		e.Next = map[string]string{}
		for id, code := range next {
			e.Next[id], _ = code.(string)
			l.knownStep(append(path, "next", id), id)
			l.knownCode(append(path, "next", id), e.Next[id])
		}
	}
	if order, ok := m["order"].([]any); ok {
		for i, pair := range order {
			p := pair.([]any)
			a, _ := p[0].(string)
			b, _ := p[1].(string)
			l.knownStep(append(path, "order", strconv.Itoa(i), "0"), a)
			l.knownStep(append(path, "order", strconv.Itoa(i), "1"), b)
			e.Order = append(e.Order, [2]string{a, b})
		}
	}
	return e
}

func (l *loader) knownCode(path []string, code string) {
	if !caperr.Known(caperr.Code(code)) {
		l.problem(path, "%s is not an error code (docs/errors.md)%s", code, suggest.Phrase(code, codes()))
	}
}

func (l *loader) knownStep(path []string, id string) {
	if l.s.Plan.Step(id) == nil {
		l.problem(path, "the plan has no step %q%s", id, suggest.Phrase(id, l.s.stepIDs()))
	}
}

func (s *Suite) stepIDs() []string {
	ids := make([]string, 0, len(s.Plan.Steps))
	for _, st := range s.Plan.Steps {
		ids = append(ids, st.ID)
	}
	return ids
}

func codes() []string {
	var out []string
	for _, i := range caperr.All() {
		out = append(out, string(i.Code))
	}
	return out
}

// modelAnswers reads an agent step's scripted answers: each calls
// functions ({function, arguments}), finishes (finish: DATA) or says text.
func (l *loader) modelAnswers(path []string, step *plan.Step, n *yamldoc.Node) []llm.Response {
	if step != nil && step.Agent == nil {
		l.problem(path, "%s is not an agent step: only an agent step's model answers", step.ID)
		return nil
	}
	var out []llm.Response
	for i, a := range n.Items {
		m, _ := a.Interface().(map[string]any)
		res := llm.Response{ID: fmt.Sprintf("plan-test-%d", i+1)}
		res.Text, _ = m["text"].(string)
		if f, ok := m["finish"]; ok {
			b, _ := json.Marshal(f)
			res.Calls = append(res.Calls, llm.Call{ID: fmt.Sprintf("finish-%d", i+1), Name: agent.Finish, Arguments: string(b)})
		}
		calls, _ := m["calls"].([]any)
		for j, c := range calls {
			cm, _ := c.(map[string]any)
			name, _ := cm["function"].(string)
			args, ok := cm["arguments"].(string)
			if !ok {
				b, _ := json.Marshal(cm["arguments"])
				args = string(b)
			}
			res.Calls = append(res.Calls, llm.Call{ID: fmt.Sprintf("call-%d-%d", i+1, j+1), Name: name, Arguments: args})
		}
		out = append(out, res)
	}
	return out
}
