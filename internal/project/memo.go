package project

import (
	"os"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/policy"
)

// policyMemo keeps the policy while its file stays as it was (path,
// size, modification time; or absent): a worker asks for every run and
// every command step, and parsing the file cost a fast step a quarter of
// a millisecond. A policy it answers is shared: callers read it.
type policyMemo struct {
	mu  sync.Mutex
	key fileKey
	pol *policy.Policy
}

type fileKey struct {
	path    string
	exists  bool
	size    int64
	modTime time.Time
}

// keyOf is the state of the file at path; ok is false when it cannot be
// told (an error other than a missing file: the loader reports it).
func keyOf(path string) (fileKey, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return fileKey{path: path}, os.IsNotExist(err)
	}
	return fileKey{path: path, exists: true, size: st.Size(), modTime: st.ModTime()}, true
}

// load answers the kept policy while path is unchanged, else read's.
func (m *policyMemo) load(path string, read func() (*policy.Policy, error)) (*policy.Policy, error) {
	k, ok := keyOf(path)
	m.mu.Lock()
	if ok && m.pol != nil && m.key == k {
		defer m.mu.Unlock()
		return m.pol, nil
	}
	m.mu.Unlock()
	pol, err := read()
	if err != nil || !ok {
		return pol, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key, m.pol = k, pol
	return pol, nil
}
