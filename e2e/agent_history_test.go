package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
)

// history: a long conversation grows its workflow's history by the same
// few KB a round (the model call's digests, model, tokens, cost and
// compiled calls; the round's sub-run; their workflow tasks), never by the
// conversation: the 30th round's request carries 30 rounds of messages.
func (l *agentLab) history(t *testing.T) {
	const rounds = 30
	var answers []answer
	for range rounds - 1 {
		answers = append(answers, calls(fn("file__checksum", `{"path":"data/a.txt"}`)))
	}
	l.model.script("history", append(answers, finishWith(fmt.Sprintf(`{"sha256":%q}`, l.sum)))...)
	p := l.plan(t, "history", "scripted", "      capabilities: [file.checksum]\n      max_rounds: 30\n      max_repairs: 0")
	code, r := l.w.run(p)
	if code != 0 || len(r.step(t, "triage").Agent.Rounds) != rounds {
		t.Fatalf("exit %d %s %s", code, r.Status, r.Message)
	}
	per, turn := roundBytes(t, r.WorkflowID+".triage")
	first, last := l.model.requests("history")[1], l.model.requests("history")[rounds-1]
	t.Logf("%d rounds: history bytes a round %v (the model call's events %d a round); request 2 %d bytes, request %d %d bytes", rounds, per, turn, len(first), rounds, len(last))
	lo, hi := slices.Min(per[1:rounds-1]), slices.Max(per[1:rounds-1])
	if hi-lo > 256 || turn > 2048 || len(last) < 5*len(first) {
		t.Fatalf("history grows with the conversation, or a model call keeps more than 2 KB: %v, %d", per, turn)
	}
}

// roundBytes is an agent workflow's history size by round (from one turn
// to the next), as its events' protobuf sizes, and what its turns' own
// events (scheduled, started, completed) keep a round on average.
func roundBytes(t *testing.T, id string) (per []int, turn int) {
	t.Helper()
	it := h.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	turns, size := 0, 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n := proto.Size(ev)
		if ev.GetActivityTaskScheduledEventAttributes() != nil {
			per, size = append(per, size), 0
			turns++
		}
		if ev.GetActivityTaskScheduledEventAttributes() != nil || ev.GetActivityTaskStartedEventAttributes() != nil || ev.GetActivityTaskCompletedEventAttributes() != nil {
			turn += n
		}
		size += n
	}
	return append(per[1:], size), turn / max(turns, 1)
}
