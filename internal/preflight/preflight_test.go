package preflight

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/planfile"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/kits"
)

func coreRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	r, err := registry.Load(registry.Options{Root: t.TempDir(), ActiveKits: []string{"core"}, Builtin: kits.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func parse(t *testing.T, src string) *plan.Plan {
	t.Helper()
	p, probs := plan.Parse("p.yaml", []byte(src))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return p
}

func TestStatusPrecedence(t *testing.T) {
	reg := coreRegistry(t)
	tests := []struct {
		name, src string
		inputs    map[string]any
		optional  bool
		status    string
		message   string
	}{
		{"ready", "name: a\nsteps:\n  - {id: s, capability: file.checksum, with: {path: x}}\n", nil, false, Ready, "ready: 1 step resolved"},
		{"gap", "name: a\nsteps:\n  - {id: s, capability: x.y}\n", nil, false, PartialComplete, "s (x.y: no_capability_match)"},
		{"policy beats gaps", "name: a\npolicy: {deny: [\"x.*\"]}\nsteps:\n  - {id: s, capability: x.y}\n", nil, false, BlockedByPolicy, `deny "x.*"`},
		{"inputs beat everything", "name: a\ninputs: {n: {type: integer}}\npolicy: {deny: [\"x.*\"]}\nsteps:\n  - {id: s, capability: x.y}\n",
			map[string]any{"n": "three"}, false, Invalid, "inputs: n: must be integer"},
		{"missing input is invalid", "name: a\ninputs: {n: {type: integer}}\nsteps:\n  - {id: s, capability: file.checksum, with: {path: x}}\n", nil, false, Invalid, `missing required input "n"`},
		{"missing input only noted when optional", "name: a\ninputs: {n: {type: integer}}\nsteps:\n  - {id: s, capability: file.checksum, with: {path: x}}\n", nil, true, Ready, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(Request{Plan: parse(t, tt.src), Inputs: tt.inputs, Registry: reg, InputsOptional: tt.optional})
			if r.Status != tt.status || !strings.Contains(r.Message, tt.message) {
				t.Fatalf("%s: %s", r.Status, r.Message)
			}
			if tt.optional && (len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "not checked")) {
				t.Fatalf("notes: %v", r.Notes)
			}
		})
	}
}

func TestSettingsLayersAndClamp(t *testing.T) {
	p := parse(t, `name: s
defaults: {timeout: 2m, retry: {max_attempts: 4, initial_interval: 2s}}
steps:
  - {id: plain, capability: a.b}
  - {id: own, capability: a.b, timeout: 30s, retry: {max_attempts: 7, backoff: 3}}
  - {id: once, capability: a.b, on_failure: fail}
`)
	tool := &manifest.Manifest{Timeouts: manifest.Timeouts{StartToClose: manifest.Duration(5 * time.Minute), Heartbeat: manifest.Duration(20 * time.Second)},
		Retry: manifest.Retry{MaxAttempts: 5}}
	st := Settings(p, p.Step("plain"), nil)
	if st.Timeout != 2*time.Minute || st.MaxAttempts != 4 || st.InitialInterval != 2*time.Second || st.Backoff != 2 {
		t.Fatalf("plan defaults: %+v", st)
	}
	st = Settings(p, p.Step("plain"), tool)
	if st.Timeout != 5*time.Minute || st.Heartbeat != 20*time.Second || st.MaxAttempts != 5 {
		t.Fatalf("tool over plan defaults: %+v", st)
	}
	st = Settings(p, p.Step("own"), tool)
	if st.Timeout != 30*time.Second || st.MaxAttempts != 7 || st.Backoff != 3 {
		t.Fatalf("step over tool: %+v", st)
	}
	if Settings(p, p.Step("once"), tool).MaxAttempts != 1 {
		t.Fatal("on_failure fail means one attempt")
	}
	if c := st.Clamp(2, true); c.MaxAttempts != 3 {
		t.Fatalf("clamp to max_tool_retries: %d", c.MaxAttempts)
	}
	if c := st.Clamp(5, false); c.MaxAttempts != 1 {
		t.Fatal("a non-idempotent tool gets one attempt")
	}
	// The policy check sees plan-requested retries only.
	pol := policy.Default()
	pol.Limits[policy.MaxToolRetries] = 2
	r := Check(Request{Plan: parse(t, "name: r\nsteps:\n  - {id: s, capability: file.checksum, with: {path: x}, retry: {max_attempts: 9}}\n"), Registry: coreRegistry(t), Policy: pol})
	if r.Status != BlockedByPolicy || r.Policy.Violations[0].StepID != "s" {
		t.Fatalf("%s %+v", r.Status, r.Policy)
	}
}

// A plan that asks retries of a tool that is not idempotent is told it
// gets one attempt, before it runs (new-user trial of issue 54).
func TestRetriesANonIdempotentToolWillNotGet(t *testing.T) {
	r := Check(Request{Plan: parse(t, `name: r
steps:
  - {id: w, capability: file.write, with: {path: out.txt, content: x}, retry: {max_attempts: 3}}
  - {id: s, capability: file.checksum, with: {path: x}, retry: {max_attempts: 3}}
`), Registry: coreRegistry(t), Policy: policy.Default()})
	want := "step w asks retry: {max_attempts: 3}, but file-write@1.0.0 is not idempotent: it gets one attempt (another could repeat what the first did); mark the tool idempotent: true if it can run twice"
	if r.Status != Ready || len(r.Notes) != 1 || r.Notes[0] != want {
		t.Fatalf("%s %q", r.Status, r.Notes)
	}
}

// Each level includes the next one twice: 2^20 inclusions of the last
// file. Loading reads each file once, the count is arithmetic, and the
// policy refuses before anything walks the inclusions.
func TestSubPlanBombIsCountedNotExpanded(t *testing.T) {
	root := t.TempDir()
	const depth = 20
	for i := 0; i < depth; i++ {
		src := "name: l\nsteps:\n"
		if i == depth-1 {
			src += "  - {id: a, capability: file.checksum, with: {path: x}}\n  - {id: b, capability: file.checksum, with: {path: x}}\n"
		} else {
			src += fmt.Sprintf("  - {id: a, plan: l%d.yaml}\n  - {id: b, plan: l%d.yaml}\n", i+1, i+1)
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("l%d.yaml", i)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := parse(t, "name: top\nsteps:\n  - {id: s, plan: l0.yaml}\n")
	p.File = filepath.Join(root, "top.yaml")
	if probs := plan.LoadSubPlans(p, root, planfile.Read); len(probs) > 0 {
		t.Fatal(probs)
	}
	if n := plan.LeafSteps(p); n != 1<<depth {
		t.Fatalf("counted %d steps, want %d", n, 1<<depth)
	}
	for _, pol := range []*policy.Policy{nil, {Limits: map[string]int{policy.MaxSteps: 0}}} {
		r := Check(Request{Plan: p, Registry: coreRegistry(t), Policy: pol})
		if r.Status != BlockedByPolicy || !strings.Contains(r.Message, "the plan has 1048576 steps") {
			t.Fatalf("%s: %s", r.Status, r.Message)
		}
	}
}

// TestCommandToolsGetAHeartbeat: a command tool that declares no
// heartbeat and may run past a minute gets one, so a step whose worker
// died moves on in about a minute, not at its start-to-close.
func TestCommandToolsGetAHeartbeat(t *testing.T) {
	p := parse(t, "name: s\nsteps:\n  - {id: a, capability: a.b}\n  - {id: quick, capability: a.b, timeout: 50s}\n  - {id: own, capability: a.b, heartbeat: 5s}\n")
	cmd := &manifest.Manifest{Entrypoint: manifest.Entrypoint{Type: manifest.EntryCommand}}
	builtin := &manifest.Manifest{Entrypoint: manifest.Entrypoint{Type: manifest.EntryBuiltin}}
	for _, c := range []struct {
		step string
		m    *manifest.Manifest
		want time.Duration
	}{
		{"a", cmd, CommandHeartbeat}, {"quick", cmd, 0}, {"own", cmd, 5 * time.Second}, {"a", builtin, 0}, {"a", nil, 0},
	} {
		if got := Settings(p, p.Step(c.step), c.m).Heartbeat; got != c.want {
			t.Errorf("%s (%v): heartbeat %s, want %s", c.step, c.m != nil, got, c.want)
		}
	}
}

// A plan refused as it was read says what was not checked yet, so its
// next problems (a missing capability, an input its tool refuses) do not
// come as a surprise.
func TestAnUnreadPlanSaysWhatWasNotChecked(t *testing.T) {
	r := InvalidReport("p.yaml", caperr.Problems{caperr.New(caperr.InvalidInput, "needs unknown step %q", "zz")})
	if r.Status != Invalid || len(r.Notes) != 1 || r.Notes[0] != NotResolvedNote {
		t.Fatalf("%s %q", r.Status, r.Notes)
	}
	if r := InvalidInputsReport("p.yaml", caperr.Problems{caperr.New(caperr.InvalidInput, "x")}); len(r.Notes) != 0 {
		t.Fatalf("a resolved plan's input problems: %q", r.Notes)
	}
}
