package step

import (
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// sandboxMode is the project policy's confinement, read when the tool
// starts processes (a command tool, server.start, a builtin with a
// sandbox: block): a policy changed while the worker runs holds from the
// next step on (the project keeps it while its file is unchanged).
func (e *Executor) sandboxMode(m *manifest.Manifest) (sandbox.Mode, error) {
	if m.Entrypoint.Type != manifest.EntryCommand && m.Sandbox == nil && !builtin.TraitsOf(m.Entrypoint.Name).StartsProcesses {
		return sandbox.ModeDefault, nil
	}
	pol, err := e.Project.Policy()
	if err != nil {
		return sandbox.ModeDefault, caperr.WithCode(err, caperr.ConfigError)
	}
	return pol.Sandbox, nil
}
