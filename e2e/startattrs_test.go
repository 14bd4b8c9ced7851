package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	capclient "github.com/capflow/capflow/client"
)

// TestRunsAreListedAsRunningAtOnce: a run started through package client
// carries its status from its start (the workflow upserts it only once it
// waits outside its first workflow task), so it is listed as running
// before any worker took it; one that ends before its steps run ends with
// its own. In a namespace that does not define CapflowStatus the start
// still succeeds, without it.
func TestRunsAreListedAsRunningAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plan := map[string]any{"name": "listed", "steps": []any{map[string]any{"id": "a", "capability": "test.noop"}}}
	id := fmt.Sprintf("listed-%d", time.Now().UnixNano())
	c := capclient.New(h.client, "no-worker-"+id) // nothing polls it
	if _, err := c.StartPlan(ctx, id, plan, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.client.TerminateWorkflow(context.Background(), id, "", "test over") }()
	ri, err := c.Describe(ctx, id)
	if err != nil || ri.Status != string(capclient.StatusRunning) {
		t.Fatalf("describe: %+v %v, want status running", ri, err)
	}
	listed := func() bool {
		runs, err := c.List(ctx, "CapflowStatus = 'running'", 1000)
		return err == nil && slices.ContainsFunc(runs, func(r capclient.RunInfo) bool { return r.ID == id })
	}
	if !eventually(10*time.Second, listed) {
		t.Fatalf("run %s is not listed with CapflowStatus = 'running'", id)
	}

	// A run that ends before its steps run (nothing to resolve) ends with
	// its own status, not the running it started with.
	ended := id + "-invalid"
	w := capclient.New(h.client, "")
	r, err := w.Start(ctx, ended, capclient.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Wait(ctx); err != nil || res.Status != capclient.StatusInvalid {
		t.Fatalf("run %s: %+v %v, want invalid", ended, res, err)
	}
	if ri, err := w.Describe(ctx, ended); err != nil || ri.Status != string(capclient.StatusInvalid) {
		t.Fatalf("describe %s: %+v %v, want status invalid", ended, ri, err)
	}

	// A namespace no capflow worker prepared.
	ns := "bare-" + id
	if out, err := exec.Command(h.temporalBin, "operator", "namespace", "create", "--address", h.address, "--namespace", ns).CombinedOutput(); err != nil {
		t.Fatalf("namespace create: %v %s", err, out)
	}
	nc, err := client.Dial(client.Options{HostPort: h.address, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bare := capclient.New(nc, "no-worker-"+id)
	var startErr error
	started := eventually(30*time.Second, func() bool { // the new namespace reaches the frontend's cache
		_, startErr = bare.StartPlan(ctx, id, plan, nil)
		return startErr == nil
	})
	if !started {
		t.Fatalf("start in namespace %s: %v", ns, startErr)
	}
	defer func() { _ = nc.TerminateWorkflow(context.Background(), id, "", "test over") }()
	if ri, err := bare.Describe(ctx, id); err != nil || ri.Status != "" || !ri.Open {
		t.Fatalf("describe in %s: %+v %v, want open, no status", ns, ri, err)
	}
}

// eventually polls cond every 200 ms until it holds or d passed.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
