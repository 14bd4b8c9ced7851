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
	st := Starts{}
	for _, f := range []string{a, b, filepath.Join(dir, "none.log")} {
		if err := st.read(f); err != nil {
			t.Fatal(err)
		}
	}
	if st[startKey("r1", "count")] != 2 || st[startKey("r2", "count")] != 1 || st.Repeated() != 1 {
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
		fault       bool
		ok          bool
		interrupted string
		why         string
	}{
		{"as promised", passed, 1, false, true, "", ""},
		{"passed, its tool started twice", passed, 2, false, false, "", "count passed but its tool started 2 times"},
		{"passed, its tool never started", passed, 0, false, false, "", "started 0 times"},
		{"wrong output", strings.Replace(passed, `"a-b"`, `"a"`, 1), 1, false, false, "", "outputs.text a, not a-b"},
		{"a number output", strings.Replace(passed, `"n":6`, `"n":5`, 1), 1, false, false, "", "outputs.n 5, not 6"},
		{"cut short by a fault", cut, 1, true, true, "count", ""},
		{"cut short without a fault", cut, 1, false, false, "", "fault during the run: false"},
		{"cut short, started twice", cut, 2, true, false, "", "started 2 times"},
		{"failed otherwise", other, 1, true, false, "", "status failed, not passed (count failed)"},
		{"lost", "", 0, true, false, "", "lost"},
	}
	for _, c := range cases {
		var res *client.Result
		if c.res != "" {
			res = result(t, c.res)
		}
		v := judge(promise, res, "r1", Starts{startKey("r1", "count"): c.starts}, c.fault)
		if v.AsExpected != c.ok || v.Interrupted != c.interrupted || !strings.Contains(v.Why, c.why) || (c.why == "") != (v.Why == "") {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

// A fault counts for a run when the two overlap in time.
func TestOverlaps(t *testing.T) {
	t0 := time.Now()
	f := []Fault{{began: t0.Add(10 * time.Second), ended: t0.Add(20 * time.Second)}}
	for _, c := range []struct {
		from, to int
		want     bool
	}{{0, 5, false}, {0, 12, true}, {15, 16, true}, {19, 30, true}, {21, 30, false}} {
		if got := overlaps(f, t0.Add(time.Duration(c.from)*time.Second), t0.Add(time.Duration(c.to)*time.Second)); got != c.want {
			t.Errorf("run %d-%d s: %v", c.from, c.to, got)
		}
	}
}
