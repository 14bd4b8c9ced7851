package step

import (
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// reach is what the project's policy lets a tool reach: its confinement
// and its network rules, read when the tool starts processes or
// connects (a command tool, an http or MCP tool, server.start,
// http.request, a builtin with a sandbox: block): a policy changed while
// the worker runs holds from the next step on (the project keeps it while
// its file is unchanged).
func (e *Executor) reach(m *manifest.Manifest) (sandbox.Mode, *egress.Rules, error) {
	t := builtin.TraitsOf(m.Entrypoint.Name)
	if m.Entrypoint.Type == manifest.EntryBuiltin && m.Sandbox == nil && !t.StartsProcesses && !t.Network {
		return sandbox.ModeDefault, nil, nil
	}
	pol, err := e.Project.Policy()
	if err != nil {
		return sandbox.ModeDefault, nil, caperr.WithCode(err, caperr.ConfigError)
	}
	return pol.Sandbox, e.Project.Egress(pol), nil
}
