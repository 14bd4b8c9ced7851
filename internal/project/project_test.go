package project

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
)

// One loader for the CLI, the worker and the activities: the policy is
// named the same way whoever checks (the report's policy.source).
func TestOneWayToLoadAProject(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "conf"), 0o755)
	os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("policy: conf/policy.yaml\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "conf", "policy.yaml"), []byte("deny: [\"http.*\"]\n"), 0o644)
	p, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := p.Registry()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := p.Policy()
	if err != nil {
		t.Fatal(err)
	}
	pl, probs := plan.Parse("p.yaml", []byte("name: p\nsteps:\n  - {id: get, capability: http.request, with: {url: \"http://127.0.0.1:1\"}}\n"))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	rep := p.Check(pl, nil, reg, pol, false)
	if rep.Status != preflight.BlockedByPolicy || rep.Policy.Source != "conf/policy.yaml" {
		t.Fatalf("status %s, policy source %q (want blocked_by_policy from conf/policy.yaml)", rep.Status, rep.Policy.Source)
	}
	if _, err := p.Router(reg, pol); err != nil {
		t.Fatalf("router: %v", err)
	}
	if got := p.RegistryOptions().StateDir; !filepath.IsAbs(got) {
		t.Fatalf("state dir %q is not absolute", got)
	}
}

// A worker loads the registry and the policy for every run: while their
// files are unchanged it gets the same ones back (not read again); a
// changed tool or policy is read at once.
func TestRegistryAndPolicyKeptWhileUnchanged(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("sandbox: off\n"), 0o644)
	p, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg1, _ := p.Registry()
	reg2, _ := p.Registry()
	pol1, _ := p.Policy()
	pol2, _ := p.Policy()
	if reg1 != reg2 || pol1 != pol2 || pol1 == nil {
		t.Fatalf("unchanged files read again: registry %v, policy %v", reg1 == reg2, pol1 == pol2)
	}
	tool := filepath.Join(dir, "tools", "t")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte("name: t\nversion: 1.0.0\ndescription: a tool\ncapabilities: [x.t]\ninput_schema: {type: object}\nentrypoint: {type: command, command: [./run.sh]}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("sandbox: required\n"), 0o644)
	reg3, _ := p.Registry()
	pol3, err := p.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if reg3 == reg1 || reg3.Tool("t", "") == nil || pol3 == pol1 || pol3.Sandbox.String() != "required" {
		t.Fatalf("a changed tool or policy not read: new registry %v (tool t %v), policy %s", reg3 != reg1, reg3.Tool("t", "") != nil, pol3.Sandbox)
	}
}
