// Package builtin holds the Go functions behind `entrypoint.type: builtin`
// tools (the core kit). Each takes the step's inputs and returns the
// envelope's data, or an error carrying a contract code.
package builtin

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
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
}

// Func is one builtin tool.
type Func func(ctx context.Context, in map[string]any, env *Env) (any, error)

var funcs = map[string]Func{}

func register(name string, f Func) { funcs[name] = f }

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

// Path resolves p against Root and refuses paths that leave both the
// project and the run folder (seed 001: paths stay under the project root
// or run directory).
func (e *Env) Path(field, p string) (string, error) {
	if p == "" {
		return "", caperr.New(caperr.InvalidInput, "%s is empty", field)
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(e.Root, p)
	}
	full = filepath.Clean(full)
	for _, base := range []string{e.Root, e.RunDir, e.Workdir} {
		if base == "" {
			continue
		}
		if within(filepath.Clean(base), full) {
			return full, nil
		}
	}
	return "", caperr.New(caperr.InvalidInput, "%s %q is outside the project root and the run folder", field, p)
}

func within(base, p string) bool {
	if p == base {
		return true
	}
	return strings.HasPrefix(p, base+string(filepath.Separator))
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
