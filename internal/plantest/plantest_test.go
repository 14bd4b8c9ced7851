package plantest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/wfapi"
)

func repo(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func prepare(t testing.TB, plan string) *Suite {
	t.Helper()
	return prepareIn(t, repo(t), plan)
}

func casesOf(t testing.TB, s *Suite) []*Case {
	t.Helper()
	file := DefaultCases(s.File)
	if file == "" {
		return []*Case{s.HappyPath()}
	}
	cases, err := s.LoadCases(file)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// Every example plan passes its cases (tests/<plan>), or its generated
// happy path.
func TestExamplePlans(t *testing.T) {
	plans, _ := filepath.Glob(filepath.Join(repo(t), "plans", "examples", "*.yaml"))
	if len(plans) < 10 {
		t.Fatalf("want the example plans, found %d", len(plans))
	}
	withCases := 0
	for _, p := range plans {
		t.Run(filepath.Base(p), func(t *testing.T) {
			s := prepare(t, p)
			if DefaultCases(p) != "" {
				withCases++
			}
			rep := s.Run(casesOf(t, s))
			for _, c := range rep.Cases {
				if !c.Passed {
					t.Errorf("case %q: %v", c.Name, c.Diffs)
				}
			}
		})
	}
	if withCases < 4 {
		t.Errorf("only %d example plans have cases", withCases)
	}
}

// Steps that wait for people get the case's decisions: an approval, a
// rejection, a skip and a retry of a failed step; unanswered, the wait
// outlasts the run's max_run_seconds.
func TestDecisions(t *testing.T) {
	s := prepare(t, filepath.Join("testdata", "gated.yaml"))
	rep := s.Run(casesOf(t, s))
	for _, c := range rep.Cases {
		if !c.Passed {
			t.Errorf("case %q: %v", c.Name, c.Diffs)
		}
	}
	if rep.Passed != 4 {
		t.Fatalf("passed %d of %d", rep.Passed, len(rep.Cases))
	}
	asked := map[string]int{}
	for _, b := range rep.Coverage.Branches {
		if b.Kind == "ask" {
			asked[b.Outcome] = len(b.Cases)
		}
		// Skipped or retried, ship failed first: its failure branch is
		// taken (it read NEVER TAKEN beside the skip that answered it).
		if b.Kind == "step" && b.Step == "ship" && b.Outcome == "failed" && len(b.Cases) != 2 {
			t.Errorf("step ship failed, taken by %v", b.Cases)
		}
	}
	if asked["skip"] != 1 || asked["retry"] != 1 || asked["fail"] != 0 {
		t.Errorf("ask branches taken: %v", asked)
	}
}

// Under by_severity a HIGH failure waits for a person: a case may give
// the decision, and the run takes it.
func TestDecisionAfterAHighFailure(t *testing.T) {
	s := prepare(t, filepath.Join("testdata", "severity.yaml"))
	rep := s.Run(casesOf(t, s))
	if rep.Passed != 1 || len(rep.Cases) != 1 {
		t.Fatalf("passed %d of %d: %+v", rep.Passed, len(rep.Cases), rep.Cases[0].Diffs)
	}
}

// A case file's faults are reported together, each at its line and
// field, before anything runs.
func TestCaseFileProblems(t *testing.T) {
	s := prepare(t, filepath.Join(repo(t), "plans", "examples", "conditions.yaml"))
	_, err := s.LoadCases(filepath.Join("testdata", "bad-cases.yaml"))
	var probs caperr.Problems
	if p, ok := err.(caperr.Problems); ok {
		probs = p
	}
	if len(probs) != 1 || probs[0].Line != 13 || probs[0].Field != "cases[1].unknown" || !strings.Contains(probs[0].Message, `unknown field "unknown"`) {
		t.Fatalf("shape problems: %v", err)
	}
	// With the shape right, the plan-aware checks.
	data, _ := os.ReadFile(filepath.Join("testdata", "bad-cases.yaml"))
	fixed := filepath.Join(t.TempDir(), "cases.yaml")
	_ = os.WriteFile(fixed, []byte(strings.Replace(string(data), "    unknown: 1\n", "", 1)), 0o644)
	_, err = s.LoadCases(fixed)
	probs, _ = err.(caperr.Problems)
	var got []string
	for _, p := range probs {
		got = append(got, fmt.Sprintf(":%d:%d: %s %s", p.Line, p.Column, p.Field, p.Message))
	}
	for _, w := range []string{
		`:4:7: cases[0].steps.fnd the plan has no step "fnd" (did you mean "find"?)`,
		`:5:21: cases[0].steps.find.data.count must be integer, not string (the output schema of find's tool)`,
		`:6:7: cases[0].steps.notify[0] notify is not a for_each step: it has no items`,
		`:7:25: cases[0].steps.archive.error.code TOOL_FAILUR is not an error code (docs/errors.md) (did you mean "TOOL_FAILURE"?)`,
		`:9:15: cases[0].expect.steps.archiv the plan has no step "archiv" (did you mean "archive"?)`,
		`:12:7: cases[1].steps.find find has both data and an error: a step either succeeds or fails`,
	} {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("missing problem %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, p := range probs {
		if p.Code != caperr.InvalidInput {
			t.Errorf("%s: code %s", p.Location(), p.Code)
		}
	}
	// Inputs, step keys, decisions no step reads, names twice.
	_, err = s.LoadCases(filepath.Join("testdata", "bad-cases-2.yaml"))
	probs, _ = err.(caperr.Problems)
	got = got[:0]
	for _, p := range probs {
		got = append(got, fmt.Sprintf("%d:%d %s", p.Line, p.Column, p.Field))
	}
	if want := "3:14 cases[0].inputs.min_filez|3:28 cases[0].inputs.notify|5:7 cases[0].steps.first/sum|6:14 cases[0].steps.find.decision|7:5 cases[1].name"; strings.Join(got, "|") != want {
		t.Errorf("problems at %q, want %q", strings.Join(got, "|"), want)
	}
}

// A case whose expectations do not hold says, per field, what was
// expected and what the run did; JUnit carries the same.
func TestFailedCaseSaysWhy(t *testing.T) {
	s := prepare(t, filepath.Join(repo(t), "plans", "examples", "for-each-checksums.yaml"))
	c := &Case{Name: "wrong", Steps: map[string]Given{
		"find": {HasData: true, Data: map[string]any{"dir": "d", "count": 2, "files": []any{"a", "b"}}},
	}, Expect: Expect{Status: "failed", Steps: map[string]string{"sum": "failed", "summary": "succeeded"},
		Outputs: map[string]any{"files": 3}, Next: map[string]string{"sum": "TOOL_FAILURE"}, Order: [][2]string{{"summary", "find"}}}}
	rep := s.Run([]*Case{c})
	r := rep.Cases[0]
	want := []string{
		"status: expected failed, got passed",
		"steps.sum: expected failed, got succeeded",
		"outputs.files: expected 3, got 2",
		`next: expected {"sum":"TOOL_FAILURE"}, got {}`,
		"order: expected summary to end before find started: find started while summary ran",
	}
	if r.Passed || rep.Failed != 1 || len(r.Diffs) != len(want) {
		t.Fatalf("diffs: %q", r.Diffs)
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Diffs[i], w) {
			t.Errorf("diff %d = %q, want %q…", i, r.Diffs[i], w)
		}
	}
	b, err := rep.JUnit()
	var suite junitSuite
	if err != nil || xml.Unmarshal(b, &suite) != nil || suite.Failures != 1 || suite.Cases[0].Failure == nil ||
		!strings.Contains(suite.Cases[0].Failure.Text, "outputs.files: expected 3, got 2") {
		t.Fatalf("junit: %v\n%s", err, b)
	}
}

// Coverage names, for each branch, the cases that took it, and the
// branches none did.
func TestCoverage(t *testing.T) {
	s := prepare(t, filepath.Join(repo(t), "plans", "examples", "conditions.yaml"))
	cov := s.Run(casesOf(t, s)).Coverage
	got := map[string]string{}
	for _, b := range cov.Branches {
		got[b.Kind+" "+b.Step+" "+b.Outcome] = strings.Join(b.Cases, "; ")
	}
	for k, v := range map[string]string{
		"when archive false":  "too few files, notice asked",
		"when notify true":    "too few files, notice asked",
		"join done not met":   "the archive fails, the run fails fast",
		"step find failed":    "",
		"step archive failed": "the archive fails, the run fails fast",
	} {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if cov.Total != 14 || cov.Taken != 11 {
		t.Errorf("taken %d of %d", cov.Taken, cov.Total)
	}
}

// BenchmarkFiftyStepPlan: 100 cases of a 50-step plan (target: under
// 10 s on a 2-core machine; docs/performance.md).
func BenchmarkFiftyStepPlan(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("name: fifty\nsteps:\n")
	for i := 0; i < 50; i++ {
		if i == 0 {
			sb.WriteString("  - {id: s0, capability: file.checksum, with: {path: plans/examples/data/a.txt}}\n")
			continue
		}
		sb.WriteString("  - {id: s" + itoa(i) + ", capability: file.checksum, needs: [s" + itoa(i-1) + "], with: {path: plans/examples/data/a.txt}}\n")
	}
	plan := filepath.Join(b.TempDir(), "fifty.yaml")
	_ = os.WriteFile(plan, []byte(sb.String()), 0o644)
	s := prepare(b, plan)
	cases := make([]*Case, 100)
	for i := range cases {
		cases[i] = s.HappyPath()
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if rep := s.Run(cases); rep.Failed > 0 {
			b.Fatalf("%v", rep.Cases[0].Diffs)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A step whose tool's output schema yields no valid generated result (a
// pattern) answers with it all the same, and its case says so; a case
// that gives the data has no such note.
func TestUngeneratedResult(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tools", "pattern")
	_ = os.MkdirAll(tool, 0o755)
	_ = os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(`name: pattern
version: 1.0.0
description: Answers an id
capabilities: [test.pattern]
input_schema: {type: object}
output_schema: {type: object, required: [id, sha], properties: {id: {type: string, pattern: "^(?:[a-z]+-){2}[0-9]{4}$"}, sha: {type: string, pattern: "^[0-9a-f]{64}$"}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: true
`), 0o644)
	_ = os.WriteFile(filepath.Join(tool, "run.sh"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	plan := filepath.Join(dir, "pattern.yaml")
	_ = os.WriteFile(plan, []byte("name: pattern\nsteps:\n  - {id: a, capability: test.pattern}\n"), 0o644)
	s := prepareIn(t, dir, plan)
	rep := s.Run([]*Case{s.HappyPath(), {Name: "given", Steps: map[string]Given{"a": {HasData: true, Data: map[string]any{"id": "ab-cd-2026", "sha": strings.Repeat("f", 64)}}}, Expect: Expect{Status: "passed"}}})
	gen, given := rep.Cases[0], rep.Cases[1]
	// A simple pattern is met (a digest's hex), another is not.
	if sha, _ := s.resultOf("pattern", "1.0.0").data.(map[string]any)["sha"].(string); sha != strings.Repeat("0", 64) {
		t.Errorf("generated sha %q", sha)
	}
	if !gen.Passed || len(gen.Warnings) != 1 || !strings.Contains(gen.Warnings[0], "a answered with a generated result its tool's output schema refuses (id: ") ||
		!given.Passed || len(given.Warnings) != 0 {
		t.Fatalf("generated: %v %v / given: %v %v", gen.Diffs, gen.Warnings, given.Diffs, given.Warnings)
	}
}

// A case's steps run through the worker's step executor, only the tool
// being the case's: a step's inputs are evaluated from what the steps
// before it gave (their digest is the run's), and a failed attempt is
// told and retried by the executor's rule.
func TestCasesRunThroughTheStepExecutor(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "flow.yaml")
	_ = os.WriteFile(plan, []byte(`name: flow
steps:
  - {id: a, capability: file.checksum, with: {path: a.txt}}
  - {id: b, capability: file.checksum, needs: [a], with: {path: "${steps.a.data.path}"}}
`), 0o644)
	s := prepareIn(t, dir, plan)
	gave := map[string]any{"path": "given/by-a.txt", "sha256": strings.Repeat("0", 64), "size": 1}
	out := s.run(&Case{Name: "flow", Steps: map[string]Given{"a": {HasData: true, Data: gave}}}, 1)
	if out.err != nil || out.res == nil {
		t.Fatalf("run: %v", out.err)
	}
	sum := sha256.Sum256([]byte(`{"path":"given/by-a.txt"}`))
	if b := out.res.Steps[1]; b.ID != "b" || b.InputsSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("b's inputs digest %q, want that of a's given path", b.InputsSHA256)
	}
	out = s.run(&Case{Name: "failing", Steps: map[string]Given{"a": {Error: &GivenError{Code: "TOOL_FAILURE"}}}}, 2)
	if out.err != nil || out.res == nil {
		t.Fatalf("run: %v", out.err)
	}
	a := out.res.Steps[0]
	if out.calls["a"] != 3 || a.Attempts != 3 || a.Envelope == nil || !strings.Contains(fmt.Sprint(a.Envelope.Feedback), "attempt 1 failed (TOOL_FAILURE), waited") {
		t.Errorf("a: %d calls, %d attempts, envelope %+v", out.calls["a"], a.Attempts, a.Envelope)
	}
}

// prepareIn prepares planFile in the project at dir.
func prepareIn(t testing.TB, dir, planFile string) *Suite {
	t.Helper()
	cfg, err := config.Load(config.Options{Project: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Prepare(cfg, planFile, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestLargePlanContinuesAsNew: a run past temporal.segment_events
// continues as new, segment after segment, as on a worker, and passes
// (hostile findings at 6003afe, 23: a 40,000-step plan that capflow run
// passes failed its plan test).
func TestLargePlanContinuesAsNew(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("temporal: {segment_events: 100}\n"), 0o644)
	var b strings.Builder
	b.WriteString("name: long\nsteps:\n")
	for i := range 150 {
		needs := ""
		if i > 0 {
			needs = fmt.Sprintf(", needs: [s%d]", i-1)
		}
		fmt.Fprintf(&b, "  - {id: s%d, capability: file.checksum, with: {path: x}%s}\n", i, needs)
	}
	plan := filepath.Join(dir, "wide.yaml")
	_ = os.WriteFile(plan, []byte(b.String()), 0o644)
	s := prepareIn(t, dir, plan)
	out := s.run(&Case{Name: "wide"}, 1)
	if out.err != nil || out.res == nil || out.res.Status != wfapi.StatusPassed || len(out.res.Steps) != 150 {
		t.Fatalf("%v %v", out.err, out.res != nil && out.res.Status == wfapi.StatusPassed)
	}
	if out.res.Segments < 2 {
		t.Fatalf("the run did not continue as new: %d segments", out.res.Segments)
	}
}
