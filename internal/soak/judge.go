package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/examples"
)

// Starts counts the starts of the non-idempotent tool by run and step,
// as the counter lines of every host say ("start RUN STEP ATTEMPT TIME"),
// and the host each started on (its file's).
type Starts struct {
	n    map[string]int
	host map[string]int
}

func newStarts() Starts { return Starts{n: map[string]int{}, host: map[string]int{}} }

func startKey(run, step string) string { return run + " " + step }

// read adds the counter lines of host's file.
func (st Starts) read(file string, host int) error {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if w := strings.Fields(sc.Text()); len(w) >= 3 && w[0] == "start" {
			k := startKey(w[1], w[2])
			st.n[k]++
			st.host[k] = host
		}
	}
	return sc.Err()
}

// Repeated is how many starts came after a step's first.
func (st Starts) Repeated() int {
	n := 0
	for _, c := range st.n {
		n += max(c-1, 0)
	}
	return n
}

// Verdict is how one run ended against its plan's promise.
type Verdict struct {
	AsExpected  bool
	Interrupted string // the step a fault cut short, when that is how it ended
	Why         string // what differs, when not as expected
}

// judge holds a run's result to its plan's promise; counted are the
// plan's steps whose tool writes counter lines, which must show exactly one
// start when the run passed. A run whose non-idempotent step was cut short
// may instead fail at that step with the promised code, provided the step
// started once (its counter lines say so, on one host; for a tool without
// them, its one attempt) and a fault hit that host, or a host the run ran
// on, while the run went on (faultOn says; runHosts are the hosts holding
// the run's folder).
func judge(p examples.Promise, counted []string, res *client.Result, runID string, st Starts, runHosts []int, faultOn func(host int) bool) Verdict {
	if res == nil {
		return Verdict{Why: "lost: it never ended"}
	}
	why := differences(p, res)
	if why == "" {
		for _, step := range counted {
			if n := st.n[startKey(runID, step)]; n != 1 {
				return Verdict{Why: fmt.Sprintf("%s passed but its tool started %d times", step, n)}
			}
		}
		return Verdict{AsExpected: true}
	}
	for step, code := range p.Interrupted {
		s := stepOf(res, step)
		if res.Status != client.StatusFailed || s == nil || s.Status != client.StepFailed || s.Envelope == nil || s.Envelope.Error == nil || string(s.Envelope.Error.Code) != code {
			continue
		}
		k := startKey(runID, step)
		starts, hosts := s.Attempts, runHosts
		if slices.Contains(counted, step) {
			starts, hosts = st.n[k], []int{st.host[k]}
		}
		hit := slices.ContainsFunc(hosts, faultOn)
		if starts != 1 || !hit {
			return Verdict{Why: fmt.Sprintf("%s failed %s, started %d times, a fault on its host during the run: %v", step, code, starts, hit)}
		}
		return Verdict{AsExpected: true, Interrupted: step}
	}
	return Verdict{Why: why}
}

// differences lists what of the promise res does not keep ("" if none).
func differences(p examples.Promise, res *client.Result) string {
	var out []string
	if p.Run != "" && string(res.Status) != p.Run {
		msg := res.Message
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		out = append(out, fmt.Sprintf("status %s, not %s (%s)", res.Status, p.Run, msg))
	}
	for _, name := range sorted(p.Outputs) {
		if got := text(res.Outputs[name]); got != p.Outputs[name] {
			out = append(out, fmt.Sprintf("outputs.%s %s, not %s", name, got, p.Outputs[name]))
		}
	}
	for _, id := range sorted(p.Steps) {
		got := "absent"
		if s := stepOf(res, id); s != nil {
			got = string(s.Status)
		}
		if got != p.Steps[id] {
			out = append(out, fmt.Sprintf("step %s %s, not %s", id, got, p.Steps[id]))
		}
	}
	return strings.Join(out, "; ")
}

func stepOf(res *client.Result, id string) *client.StepResult {
	for i := range res.Steps {
		if res.Steps[i].ID == id {
			return &res.Steps[i]
		}
	}
	return nil
}

// text is a value as a promise writes it: a string as it is, anything
// else as JSON.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// recovery is how long after a fault of the cluster its effects last:
// heartbeats sent while PostgreSQL reconnects time out (a soak saw a
// step's 2 s heartbeat timeout fire a second after a restart ended).
const recovery = 5 * time.Second

// faultDuring reports whether a fault that could cut a step on host short
// was under way while a run was: a worker killed or stopped there, or the
// cluster's server or database down (any host), until it recovered.
func faultDuring(faults []Fault, host int, from, to time.Time) bool {
	for _, f := range faults {
		if f.began.IsZero() || !f.began.Before(to) {
			continue
		}
		switch f.Kind {
		case WorkerKill, HostLost:
			if f.Host == host && (f.ended.IsZero() || f.ended.After(from)) {
				return true
			}
		default:
			if f.ended.IsZero() || f.ended.Add(recovery).After(from) {
				return true
			}
		}
	}
	return false
}

// landed reports whether a fault hit something: tools running on its host,
// or runs under way for a fault of the cluster.
func (f Fault) landed() bool {
	if f.Kind == WorkerKill || f.Kind == HostLost {
		return f.Tools > 0
	}
	return f.InFlight > 0
}
