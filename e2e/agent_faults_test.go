package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// echoedKey: an endpoint that echoes the request's key in its answer;
// the key reaches no status, report or log (LLM_LOG included).
func (l *agentLab) echoedKey(t *testing.T) {
	l.model.script("echo", textAnswer(echoKey), finishWith(fmt.Sprintf(`{"sha256":%q}`, l.sum)))
	p := l.plan(t, "echo", "scripted", "      capabilities: [file.checksum]\n      max_rounds: 3")
	code, r := l.w.run(p)
	md, _ := os.ReadFile(r.Report.Markdown)
	js, _ := os.ReadFile(r.Report.JSON)
	_, e, _ := l.w.capflow("status", r.WorkflowID)
	status := fmt.Sprint(e)
	if code != 0 || len(md) == 0 || strings.Contains(string(md)+string(js)+status, "sk-agent-secret-key") {
		t.Fatalf("exit %d, or the key is in the report or status", code)
	}
}

// serverFails: a model server that fails every try of round 2 fails the
// step with its code; the round before stays in its record.
func (l *agentLab) serverFails(t *testing.T) {
	down := answer{status: http.StatusServiceUnavailable}
	l.model.script("down", calls(fn("file__checksum", `{"path":"data/a.txt"}`)), down, down, down, down, down)
	p := l.plan(t, "down", "scripted", "      capabilities: [file.checksum]\n      max_rounds: 3\n      budget: {llm_calls: 10}")
	code, r := l.w.run(p)
	st := r.step(t, "triage")
	if code != 1 || st.Envelope == nil || st.Envelope.Error.Code != "DEPENDENCY_UNAVAILABLE" || !strings.Contains(st.Envelope.Message, "round 2: the model call failed") ||
		st.Agent == nil || len(st.Agent.Rounds) != 1 || st.Agent.Spent.LLMCalls != 6 || len(l.model.requests("down")) != 6 {
		t.Fatalf("exit %d: %+v (%d requests)", code, st, len(l.model.requests("down")))
	}
}
