package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/wfapi"
)

// slotSpan is one step's time in a limited tool (its log: "start MS label",
// "end MS label").
type slotSpan struct {
	label      string
	start, end int64 // epoch ms
}

func readSpans(t *testing.T, path string) []slotSpan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]int64{}
	var out []slotSpan
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("log line %q", line)
		}
		ms, _ := strconv.ParseInt(f[1], 10, 64)
		if f[0] == "start" {
			open[f[2]] = ms
		} else {
			out = append(out, slotSpan{f[2], open[f[2]], ms})
		}
	}
	slices.SortFunc(out, func(a, b slotSpan) int { return int(a.start - b.start) })
	return out
}

// mostAtOnce is the largest number of spans running at one moment.
func mostAtOnce(spans []slotSpan) int {
	most := 0
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if o.start <= s.start && s.start < o.end {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func limitsPlan(t *testing.T, name, capability string, n, ms int, log string, account func(i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nmax_parallel: %d\nsteps:\n", name, n)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, capability: %s, with: {ms: %d, log: %q", i, capability, ms, log)
		if account != nil {
			fmt.Fprintf(&b, ", account: %s", account(i))
		}
		b.WriteString("}}\n")
	}
	return h.writePlan(t, name, b.String())
}

// Two runs of six 2-second steps of a tool with concurrency 2, on two
// workers at once: never more than two run at the same moment, and the
// steps that waited said why while they did.
func TestLimitsHoldAcrossRunsAndWorkers(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "limits-concurrency")
	workerAt(t, h.project, w.env...) // a second worker on the queue
	log := h.freshLog("limits-concurrency.log")
	plan := limitsPlan(t, "limited", "test.limited", 6, 2000, log, nil)
	a, b := w.detach(plan), w.detach(plan)
	for _, id := range []string{a, b} {
		if res := waitResult(t, id, 3*time.Minute); res.Status != wfapi.StatusPassed {
			t.Fatalf("%s: %s %s", id, res.Status, res.Message)
		}
	}
	// The limit's workflow so far (it waits for more, idle), for the
	// replay test.
	recordChange(t, "limit-trusts-nobody", "limit-concurrency.limit-trust", wfapi.LimitWorkflowID("capflow-limits-concurrency", "tool limited", ""))
	spans := readSpans(t, log)
	if len(spans) != 12 || mostAtOnce(spans) != 2 {
		t.Fatalf("%d steps ran, at most %d at once (want 12, 2): %v", len(spans), mostAtOnce(spans), spans)
	}
	code, env, _ := w.capflow("report", a)
	if code != 0 || !strings.Contains(fmt.Sprint(env.Data), "for a slot (tool limited: concurrency 2)") {
		t.Fatalf("no step of %s said it waited for a slot: %v", a, env.Data)
	}
}

// Twenty steps of a tool with rate 5/s never start more than about five in
// one second; a key keeps a limit per value: two accounts do not wait for
// each other.
func TestLimitsRateAndKey(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "limits-rate")
	log := h.freshLog("limits-rate.log")
	code, r := w.run(limitsPlan(t, "rated", "test.rated", 20, 0, log, nil))
	if code != 0 {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	spans := readSpans(t, log)
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if o.start >= s.start && o.start < s.start+1000 {
				n++
			}
		}
		// Granted 200 ms apart; a loaded machine may start two of them
		// closer (the tools' own clocks).
		if n > 7 {
			t.Fatalf("%d starts within a second of %d (rate 5/s): %v", n, s.start, spans)
		}
	}
	if first, last := spans[0].start, spans[len(spans)-1].start; last-first < 3500 {
		t.Fatalf("20 starts at 5/s took %d ms", last-first)
	}
	// A capability's limit (capflow.yaml) and its tool's both hold a step.
	log = h.freshLog("limits-capability.log")
	capped := limitsPlan(t, "capped", "test.capped", 3, 500, log, nil)
	if code, env, _ := w.capflow("plan", "check", capped); code != 0 || !strings.Contains(fmt.Sprint(env.Data), "limits:[map[capability:test.capped limits:concurrency 1 steps:[s0 s1 s2]] map[limits:rate 5/s steps:[s0 s1 s2] tool:rated@1.0.0]]") {
		t.Fatalf("plan check: exit %d, %v", code, env.Data)
	}
	if code, r = w.run(capped); code != 0 {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	if spans := readSpans(t, log); len(spans) != 3 || mostAtOnce(spans) != 1 {
		t.Fatalf("capability test.capped (concurrency 1): %d steps, %d at once: %v", len(spans), mostAtOnce(spans), spans)
	}
	log = h.freshLog("limits-key.log")
	keyed := limitsPlan(t, "keyed", "test.keyed", 4, 1500, log, func(i int) string { return []string{"alice", "bob"}[i%2] })
	// plan check lists the limits that apply.
	if code, env, _ := w.capflow("plan", "check", keyed); code != 0 || !strings.Contains(fmt.Sprint(env.Data), "[map[limits:concurrency 1 per account steps:[s0 s1 s2 s3] tool:keyed@1.0.0]]") {
		t.Fatalf("plan check: exit %d, %v", code, env.Data)
	}
	code, r = w.run(keyed)
	if code != 0 {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	spans = readSpans(t, log)
	byAccount := map[string][]slotSpan{}
	for _, s := range spans {
		i, _ := strconv.Atoi(strings.TrimPrefix(s.label[strings.LastIndex(s.label, "/")+1:], "s"))
		byAccount[[]string{"alice", "bob"}[i%2]] = append(byAccount[[]string{"alice", "bob"}[i%2]], s)
	}
	if mostAtOnce(byAccount["alice"]) != 1 || mostAtOnce(byAccount["bob"]) != 1 || mostAtOnce(spans) != 2 {
		t.Fatalf("alice %d at once, bob %d, both %d (want 1, 1, 2): %v", mostAtOnce(byAccount["alice"]), mostAtOnce(byAccount["bob"]), mostAtOnce(spans), spans)
	}
}

// A worker SIGKILLed while it holds a slot: the slot is free again within
// the step's heartbeat (the tool's 10s); a step cancelled while it waits
// takes nothing, so the one after it starts when the slot is given back.
func TestLimitsOutliveDeadWorkersAndCancels(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "limits-outlive")
	log := h.freshLog("limits-kill.log")
	holder := w.detach(limitsPlan(t, "held", "test.keyed", 1, 120000, log, func(int) string { return "kill" }))
	waitForLine(t, log, "start", 60*time.Second)
	w.kill()
	killed := time.Now()
	w.start()
	// Cancelled, its step is not retried on the new worker: only the dead
	// one's lease holds the slot.
	_, _, _ = w.capflow("cancel", holder)
	code, r := w.run(limitsPlan(t, "after-kill", "test.keyed", 1, 0, log, func(int) string { return "kill" }))
	if code != 0 {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	if took := time.Since(killed); took > 40*time.Second {
		t.Fatalf("the dead worker's slot came back after %s (lease: the tool's 10s heartbeat)", took)
	}

	log = h.freshLog("limits-cancel.log")
	first := w.detach(limitsPlan(t, "first", "test.keyed", 1, 10000, log, func(int) string { return "cancel" }))
	waitForLine(t, log, "start", 60*time.Second)
	console := startConsole(t)
	waiting := w.detach(limitsPlan(t, "waiting", "test.keyed", 1, 0, log, func(int) string { return "cancel" }))
	// While it waits, its status and the console say why.
	why := "waiting for a slot (tool keyed: concurrency 1 per account)"
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, env, _ := w.capflow("status", waiting)
		if strings.Contains(fmt.Sprint(env.Data), why) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting step's status does not say why: %v", env.Data)
		}
		time.Sleep(500 * time.Millisecond)
	}
	resp, err := http.Get(console + "/api/runs/" + waiting)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"latest":{"phase":"limits"`) || !strings.Contains(string(body), why) {
		t.Fatalf("the console's run does not say why its step waits: %s", body)
	}
	if code, env, _ := w.capflow("cancel", waiting); code != 5 { // the run ended cancelled
		t.Fatalf("cancel: exit %d %s", code, env.Message)
	}
	code, r = w.run(limitsPlan(t, "third", "test.keyed", 1, 0, log, func(int) string { return "cancel" }))
	if code != 0 || waitResult(t, first, time.Minute).Status != wfapi.StatusPassed {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	spans := readSpans(t, log)
	if len(spans) != 2 || spans[1].start-spans[0].end > 5000 {
		t.Fatalf("after the cancelled waiter, the next step started %d ms after the slot was given back: %v", spans[len(spans)-1].start-spans[0].end, spans)
	}
}

func waitForLine(t *testing.T, path, prefix string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), prefix+" ") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %q line in %s after %s", prefix, path, within)
}
