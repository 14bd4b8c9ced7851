package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	capclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/embed"
)

// TestEmbeddedWorkerStartsEagerly: a Go service embeds a capflow worker on
// its own Temporal client and starts a run with Eager: the run passes, and
// the server handed its first workflow task back in the start's answer
// (the start event says the eager start was accepted); without Eager it
// was not.
func TestEmbeddedWorkerStartsEagerly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queue := fmt.Sprintf("embedded-%d", time.Now().UnixNano())
	w, err := embed.Start(ctx, h.client, embed.Options{Project: h.project, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	plan := capflowPlanOf("text.render", map[string]any{"template": "ok"}, 3, true)
	for _, eager := range []bool{true, false} {
		run, err := w.Client().StartWith(ctx, capclient.StartOptions{Eager: eager}, capclient.Input{Plan: plan})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Wait(ctx)
		if err != nil || res.Status != "passed" {
			t.Fatalf("eager %v: %v %+v", eager, err, res)
		}
		it := h.client.GetWorkflowHistory(ctx, run.ID, run.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		first, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got := first.GetWorkflowExecutionStartedEventAttributes().GetEagerExecutionAccepted(); got != eager {
			t.Fatalf("asked for an eager start: %v; the server accepted one: %v", eager, got)
		}
	}
}
