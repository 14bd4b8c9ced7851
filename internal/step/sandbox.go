package step

import (
	"os"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// sandboxMode is the project policy's confinement, read when the tool
// starts processes (a command tool, server.start, a builtin with a
// sandbox: block):
// a policy changed while the worker runs holds from the next step on.
func (e *Executor) sandboxMode(m *manifest.Manifest) (sandbox.Mode, error) {
	if m.Entrypoint.Type != manifest.EntryCommand && m.Sandbox == nil && !builtin.TraitsOf(m.Entrypoint.Name).StartsProcesses {
		return sandbox.ModeDefault, nil
	}
	file := e.Project.Config.Abs(e.Project.Config.Policy)
	st, statErr := os.Stat(file)
	if mode, ok := e.policyMode.get(file, st, statErr); ok {
		return mode, nil
	}
	pol, err := e.Project.Policy()
	if err != nil {
		return sandbox.ModeDefault, caperr.WithCode(err, caperr.ConfigError)
	}
	e.policyMode.put(file, st, statErr, pol.Sandbox)
	return pol.Sandbox, nil
}

// modeMemo keeps the policy file's sandbox mode while the file stays as
// it was (path, size, modification time; or absent): every command step
// asks, and parsing the file cost a fast step a quarter of a millisecond.
type modeMemo struct {
	mu   sync.Mutex
	key  fileKey
	mode sandbox.Mode
	set  bool
}

type fileKey struct {
	path    string
	exists  bool
	size    int64
	modTime time.Time
}

func keyOf(path string, st os.FileInfo, err error) (fileKey, bool) {
	if err != nil {
		// Only a missing file is a state to keep; another error is read
		// again (and reported) by the policy's loader.
		return fileKey{path: path}, os.IsNotExist(err)
	}
	return fileKey{path: path, exists: true, size: st.Size(), modTime: st.ModTime()}, true
}

func (m *modeMemo) get(path string, st os.FileInfo, err error) (sandbox.Mode, bool) {
	k, ok := keyOf(path, st, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode, ok && m.set && m.key == k
}

func (m *modeMemo) put(path string, st os.FileInfo, err error, mode sandbox.Mode) {
	k, ok := keyOf(path, st, err)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key, m.mode, m.set = k, mode, true
}
