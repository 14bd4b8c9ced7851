// Package builtin holds the Go functions behind `entrypoint.type: builtin`
// tools (the core kit). Each takes the step's inputs and returns the
// envelope's data, or an error carrying a contract code.
package builtin

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/jq"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// Env is what a builtin may use besides its inputs.
type Env struct {
	// Root is the project root: relative paths resolve here, and no path
	// may leave it or the run folder.
	Root string
	// Workdir is the step's own folder for artifacts.
	Workdir string
	// RunDir is the run's folder (may equal a parent of Workdir).
	RunDir string
	// Feedback receives progress events.
	Feedback *envelope.Builder
	// Sandbox is the policy's confinement, Confine the tool's manifest
	// `sandbox:` block: for builtins that start processes (server.start).
	Sandbox sandbox.Mode
	Confine *manifest.Sandbox
	// Net is what the run may reach on the network (nil: public
	// addresses only).
	Net *egress.Rules
	// Folders are the tool's write folders, held open by the step (nil:
	// none, or opened by what needs them).
	Folders sandbox.Folders
	// Protected are the project's paths (relative to Root) no builtin
	// writes: manifest.Protected and what the configuration adds.
	Protected []string
	// Private are folders of the project (absolute) no builtin reads but
	// for its own run's folder in them: the runs folder, the state.
	Private []string

	created map[string]bool // the step folder's ledger, read once
}

// Func is one builtin tool.
type Func func(ctx context.Context, in map[string]any, env *Env) (any, error)

var funcs = map[string]Func{}

// Traits are what a builtin does beyond computing its data, declared where
// it registers: nothing learns them from its name.
type Traits struct {
	// StartsProcesses: it starts a process tree (confined by the policy's
	// sandbox: whatever its manifest says).
	StartsProcesses bool
	// WaitsForPerson: a run never calls it; the workflow waits for a
	// person's decision instead (never cached, never local).
	WaitsForPerson bool
	// Network: it connects to addresses its inputs name (through
	// Env.Rules, which the policy's network block widens).
	Network bool
}

var traits = map[string]Traits{}

func register(name string, f Func, t ...Traits) {
	funcs[name] = f
	if len(t) > 0 {
		traits[name] = t[0]
	}
}

// Register adds a builtin from another package (the runtime kit).
func Register(name string, f Func, t Traits) { register(name, f, t) }

// TraitsOf are the traits the builtin named name declared.
func TraitsOf(name string) Traits { return traits[name] }

// Pure is a builtin's trait too (registerPure, its inputs' test).

// Lookup returns the function registered under name.
func Lookup(name string) (Func, bool) { f, ok := funcs[name]; return f, ok }

// Names lists the registered builtins, sorted.
func Names() []string {
	var out []string
	for n := range funcs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Rules are the network rules the step runs under, with what its run's
// servers were given.
func (e *Env) Rules() *egress.Rules { return e.Net.For(e.RunDir) }

// createdLedger is the file in the step folder that lists what this step
// created, so a retry may replace its own earlier output without
// overwrite: true while files that existed before the step stay protected.
const createdLedger = ".capflow-created"

// mayReplace refuses to replace something that existed before the step
// unless overwrite is set (docs/limits.md: destructive effects need a flag).
func (e *Env) mayReplace(pl *place, overwrite bool) error {
	st, err := pl.root.Lstat(pl.rel)
	if err != nil {
		return nil // nothing there to replace
	}
	if st.IsDir() {
		return caperr.New(caperr.InvalidInput, "%s %q is a folder: a file cannot replace it", pl.field, pl.given)
	}
	if overwrite || e.createdByStep(pl.abs) {
		return nil
	}
	return caperr.New(caperr.InvalidInput, "%s %q already exists: set overwrite: true to replace it", pl.field, pl.given)
}

func (e *Env) createdByStep(abs string) bool {
	if e.Workdir == "" {
		return false
	}
	if e.created == nil {
		// Read once per call: an extraction asks for every entry.
		e.created = map[string]bool{}
		b, _ := os.ReadFile(filepath.Join(e.Workdir, createdLedger))
		for _, l := range strings.Split(string(b), "\n") {
			e.created[l] = true
		}
	}
	return e.created[abs]
}

// noteCreated records paths this step created (no-op without a step folder).
func (e *Env) noteCreated(abs ...string) {
	if e.Workdir == "" || len(abs) == 0 {
		return
	}
	f, err := os.OpenFile(filepath.Join(e.Workdir, createdLedger), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(strings.Join(abs, "\n") + "\n")
	if e.created != nil {
		for _, a := range abs {
			e.created[a] = true
		}
	}
}

// inputs helpers: the schemas have already been checked, but builtins are
// also called directly, so they stay defensive.

func str(in map[string]any, k string) string {
	s, _ := in[k].(string)
	return s
}

func boolean(in map[string]any, k string) bool {
	b, _ := in[k].(bool)
	return b
}

func integer(in map[string]any, k string, def int64) int64 {
	switch v := in[k].(type) {
	case int64:
		return v
	case uint64:
		return int64(v)
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case interface{ Int64() (int64, error) }:
		if n, err := v.Int64(); err == nil {
			return n
		}
	}
	return def
}

// pure holds the builtins that may be evaluated inside workflow code
// (`execution: inline`, docs/manifests.md), each with the test its inputs
// must pass: no file read or written, no process, no network, bounded.
var pure = map[string]pureFunc{}

type pureFunc struct {
	ok func(in map[string]any) bool
	// ready reports, without waiting, whether what an evaluation needs is
	// ready, and readies it in the background when not (nil: nothing).
	ready func(in map[string]any) bool
	// clock, when set, reports inputs whose result is the time they are
	// evaluated at: never evaluated before the step starts, nor inline.
	clock func(in map[string]any) bool
}

func registerPure(name string, f Func, p pureFunc) {
	register(name, f)
	pure[name] = p
}

// NoFiles reports whether the builtin name, given these inputs, reads and
// writes no file (a pure one: its step needs no folder).
func NoFiles(name string, in map[string]any) bool {
	p, ok := pure[name]
	return ok && p.ok(in)
}

// Prepare readies what pure builtins need to run inline (a jq child and a
// text child), and waits for them: a worker calls it as it starts.
func Prepare() {
	_ = jq.Warm(int64(evalMemory))
	_ = textChildren.Warm(int64(evalMemory))
}

// Pure reports whether the builtin name, given these inputs, computes its
// data from them alone and is ready to, so it may run inline in the
// workflow task now; it never waits (what it needs is readied in the
// background, and meanwhile the step runs as a local activity).
func Pure(name string, in map[string]any) bool {
	p, ok := pure[name]
	if !ok || !p.ok(in) || (p.clock != nil && p.clock(in)) {
		return false
	}
	return p.ready == nil || p.ready(in)
}
