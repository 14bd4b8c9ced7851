package soak

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/examples"
)

// The schedule spreads faults evenly inside the window, cycles the kinds
// and the hosts a fault of a host hits.
func TestSchedule(t *testing.T) {
	got := Schedule(8, 90*time.Second, 3)
	want := []struct {
		kind Kind
		at   time.Duration
		host int
	}{
		{WorkerKill, 10 * time.Second, 0}, {ServerKill, 20 * time.Second, 0}, {PostgresRestart, 30 * time.Second, 0}, {HostLost, 40 * time.Second, 1},
		{WorkerKill, 50 * time.Second, 2}, {ServerKill, 60 * time.Second, 0}, {PostgresRestart, 70 * time.Second, 0}, {HostLost, 80 * time.Second, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("%d faults", len(got))
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].At != w.at || got[i].Host != w.host {
			t.Errorf("fault %d: %s at %s on host %d, want %s at %s on %d", i, got[i].Kind, got[i].At, got[i].Host, w.kind, w.at, w.host)
		}
	}
}

func TestStarts(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	_ = os.WriteFile(a, []byte("start r1 count 1 T\nstart r2 count 1 T\ngarbage\n"), 0o644)
	_ = os.WriteFile(b, []byte("start r1 count 2 T\n"), 0o644) // r1's count started again, on another host
	st := newStarts()
	for i, f := range []string{a, b, filepath.Join(dir, "none.log")} {
		if err := st.read(f, i); err != nil {
			t.Fatal(err)
		}
	}
	if st.n[startKey("r1", "count")] != 2 || st.n[startKey("r2", "count")] != 1 || st.Repeated() != 1 || st.host[startKey("r2", "count")] != 0 {
		t.Fatalf("%v, repeated %d", st, st.Repeated())
	}
}

func result(t *testing.T, js string) *client.Result {
	t.Helper()
	var r client.Result
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestJudge(t *testing.T) {
	promise := examples.Promise{Run: "passed", Outputs: map[string]string{"text": "a-b", "n": "6"},
		Steps: map[string]string{"after": "succeeded"}, Interrupted: map[string]string{"count": "TASK_TIMEOUT"}}
	passed := `{"status":"passed","outputs":{"text":"a-b","n":6},"steps":[{"id":"count","status":"succeeded"},{"id":"after","status":"succeeded"}]}`
	cut := `{"status":"failed","message":"count failed","steps":[{"id":"count","status":"failed","envelope":{"error":{"code":"TASK_TIMEOUT"}}},{"id":"after","status":"skipped"}]}`
	other := `{"status":"failed","message":"count failed","steps":[{"id":"count","status":"failed","envelope":{"error":{"code":"TOOL_FAILURE"}}},{"id":"after","status":"skipped"}]}`
	cases := []struct {
		name        string
		res         string
		starts      int
		faultOn     int // the host a fault hit during the run (-1: none)
		ok          bool
		interrupted string
		why         string
	}{
		{"as promised", passed, 1, -1, true, "", ""},
		{"passed, its tool started twice", passed, 2, -1, false, "", "count passed but its tool started 2 times"},
		{"passed, its tool never started", passed, 0, -1, false, "", "started 0 times"},
		{"wrong output", strings.Replace(passed, `"a-b"`, `"a"`, 1), 1, -1, false, "", "outputs.text a, not a-b"},
		{"a number output", strings.Replace(passed, `"n":6`, `"n":5`, 1), 1, -1, false, "", "outputs.n 5, not 6"},
		{"cut short by a fault on its host", cut, 1, 2, true, "count", ""},
		{"cut short, a fault elsewhere", cut, 1, 1, false, "", "a fault on its host during the run: false"},
		{"cut short without a fault", cut, 1, -1, false, "", "a fault on its host during the run: false"},
		{"cut short, started twice", cut, 2, 2, false, "", "started 2 times"},
		{"failed otherwise", other, 1, 2, false, "", "status failed, not passed (count failed)"},
		{"lost", "", 0, 2, false, "", "lost"},
	}
	for _, c := range cases {
		var res *client.Result
		if c.res != "" {
			res = result(t, c.res)
		}
		st := newStarts()
		st.n[startKey("r1", "count")], st.host[startKey("r1", "count")] = c.starts, 2
		v := judge(promise, []string{"count"}, res, "r1", st, nil, func(host int) bool { return host == c.faultOn })
		if v.AsExpected != c.ok || v.Interrupted != c.interrupted || !strings.Contains(v.Why, c.why) || (c.why == "") != (v.Why == "") {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

// A step without counter lines (server.start) cut short: one attempt, and
// a fault on a host the run ran on.
func TestJudgeUncounted(t *testing.T) {
	promise := examples.Promise{Run: "passed", Interrupted: map[string]string{"start": "TASK_TIMEOUT"}}
	cut := result(t, `{"status":"failed","steps":[{"id":"start","status":"failed","attempts":1,"envelope":{"error":{"code":"TASK_TIMEOUT"}}}]}`)
	twice := result(t, `{"status":"failed","steps":[{"id":"start","status":"failed","attempts":2,"envelope":{"error":{"code":"TASK_TIMEOUT"}}}]}`)
	on1 := func(h int) bool { return h == 1 }
	if v := judge(promise, nil, cut, "r", newStarts(), []int{0, 1}, on1); !v.AsExpected || v.Interrupted != "start" {
		t.Errorf("cut short on a host it ran on: %+v", v)
	}
	if v := judge(promise, nil, cut, "r", newStarts(), []int{0}, on1); v.AsExpected {
		t.Errorf("a fault on a host it never ran on: %+v", v)
	}
	if v := judge(promise, nil, twice, "r", newStarts(), []int{1}, on1); v.AsExpected {
		t.Errorf("two attempts: %+v", v)
	}
	if v := judge(promise, nil, result(t, `{"status":"passed"}`), "r", newStarts(), nil, on1); !v.AsExpected {
		t.Errorf("passed, nothing counted: %+v", v)
	}
}

// A fault of a host counts for a run on that host while the two overlap
// in time; one of the cluster, for any host, until it recovered.
func TestFaultDuring(t *testing.T) {
	t0 := time.Now()
	f := []Fault{{Kind: WorkerKill, Host: 1, began: t0.Add(10 * time.Second), ended: t0.Add(20 * time.Second)},
		{Kind: PostgresRestart, began: t0.Add(30 * time.Second), ended: t0.Add(31 * time.Second)}}
	for _, c := range []struct {
		host, from, to int
		want           bool
	}{{1, 0, 5, false}, {1, 0, 12, true}, {1, 15, 16, true}, {1, 19, 29, true}, {1, 21, 29, false}, {0, 0, 12, false},
		{0, 25, 30, false}, {0, 25, 31, true}, {2, 34, 40, true}, {2, 37, 40, false}} {
		if got := faultDuring(f, c.host, t0.Add(time.Duration(c.from)*time.Second), t0.Add(time.Duration(c.to)*time.Second)); got != c.want {
			t.Errorf("host %d, run %d-%d s: %v", c.host, c.from, c.to, got)
		}
	}
	for _, c := range []struct {
		f    Fault
		want bool
	}{{Fault{Kind: HostLost, Tools: 3}, true}, {Fault{Kind: HostLost, InFlight: 3}, false}, {Fault{Kind: PostgresRestart, InFlight: 1}, true}, {Fault{Kind: ServerKill}, false}} {
		if c.f.landed() != c.want {
			t.Errorf("%+v landed: %v", c.f, !c.want)
		}
	}
}
