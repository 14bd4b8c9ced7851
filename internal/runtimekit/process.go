// Package runtimekit is the runtime kit (docs/runtime.md): servers that
// outlive their step, readiness probes, log issues, a run's final report,
// and browser scenarios in headless Chromium. Its state lives in the run
// folder: processes.json, logs/, artifacts/. A process is only ever
// signalled after its identity (pid, start time, argv, cwd) matches the
// ownership hash recorded when the run started it, and the kernel shows
// the run's ownership token in its environment (owner.go).
package runtimekit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/procfs"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/sandbox"
)

// ProcessesFile is the run's record of the processes it started.
const ProcessesFile = "processes.json"

// Record is one process the run started.
type Record struct {
	Name       string     `json:"name"`
	PID        int        `json:"pid"`
	PGID       int        `json:"pgid"`
	StartTicks uint64     `json:"start_ticks"`
	Argv       []string   `json:"argv"`
	Cwd        string     `json:"cwd"`
	LogPath    string     `json:"log_path"`
	Hash       string     `json:"ownership_hash"`
	Token      string     `json:"ownership_token"`
	Seal       string     `json:"ownership_seal,omitempty"`
	StartedAt  string     `json:"started_at"`
	Readiness  *Readiness `json:"readiness,omitempty"`
	// StoppedAt is set once capflow stopped it (or found it gone).
	StoppedAt string `json:"stopped_at,omitempty"`
	Stop      string `json:"stop,omitempty"`
}

// Registry is processes.json.
type Registry struct {
	Processes []Record `json:"processes"`
}

// startTicks reads when the kernel started pid: with the pid, what tells
// one process from a later one that reuses it.
func startTicks(pid int) (uint64, error) { return procfs.StartTicks(pid) }

// ownership is the hash that binds a record to one process of one run.
func ownership(runDir string, pid int, ticks uint64, argv []string, cwd string) string {
	h := sha256.New()
	fmt.Fprintf(h, "capflow-ownership\x00%s\x00%d\x00%d\x00%s\x00%s", runDir, pid, ticks, strings.Join(argv, "\x00"), cwd)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Verify checks that the process a record names is still the one the run
// started: "" when it is, else why not (gone, another process, an edited
// record). The hash binds pid, start time, argv and cwd as launched to the
// run; the kernel must agree on the pid's start time (a recycled pid has
// another) and its process group. argv and cwd are not read back from the
// kernel: a wrapper that execs (a pyenv shim, say) changes them legitimately.
func (r Record) Verify(runDir string) string {
	if r.PID <= 1 || r.PGID <= 1 {
		return fmt.Sprintf("pid %d / pgid %d is not a process the run could own", r.PID, r.PGID)
	}
	if ownership(runDir, r.PID, r.StartTicks, r.Argv, r.Cwd) != r.Hash {
		return fmt.Sprintf("the record of pid %d does not match its ownership hash (processes.json edited?)", r.PID)
	}
	ticks, err := startTicks(r.PID)
	if err != nil {
		return fmt.Sprintf("pid %d is gone (%v)", r.PID, err)
	}
	if ticks != r.StartTicks {
		return fmt.Sprintf("pid %d is another process now (it started at tick %d, the run's at %d)", r.PID, ticks, r.StartTicks)
	}
	if pgid, err := syscall.Getpgid(r.PID); err != nil || pgid != r.PGID {
		return fmt.Sprintf("pid %d is no longer in process group %d", r.PID, r.PGID)
	}
	if why := r.checkToken(runDir); why != "" && !r.sealed(runDir) {
		return why
	}
	return ""
}

// withRegistry reads processes.json under an exclusive lock, lets f
// change it, and writes it back atomically.
func withRegistry(runDir string, f func(*Registry) error) error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(runDir, ProcessesFile+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	reg, err := ReadRegistry(runDir)
	if err != nil {
		return err
	}
	if err := f(reg); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(reg, "", "  ")
	tmp := filepath.Join(runDir, ProcessesFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(runDir, ProcessesFile))
}

// ReadRegistry reads processes.json (empty when the run started nothing).
// maxRegistry bounds processes.json as it is read.
const maxRegistry = 16 << 20

func ReadRegistry(runDir string) (*Registry, error) {
	var reg Registry
	if _, err := os.Lstat(filepath.Join(runDir, ProcessesFile)); errors.Is(err, os.ErrNotExist) {
		return &reg, nil
	}
	b, err := beneath.ReadFile(runDir, ProcessesFile, maxRegistry, "processes.json")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &reg); err != nil {
		return nil, caperr.New(caperr.OwnershipValidationError, "%s is not valid JSON (edited by hand?): %v", filepath.Join(runDir, ProcessesFile), err)
	}
	return &reg, nil
}

// Skipped is a process stop left alone, and why.
type Skipped struct {
	PID    int    `json:"pid"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// StopResult is what a stop did.
type StopResult struct {
	Stopped []int     `json:"stopped"`
	Skipped []Skipped `json:"skipped"`
}

// Stop stops the run's running processes (all, or the one named): SIGTERM
// to the process group, SIGKILL after grace. A process whose ownership
// cannot be verified is never signalled: it is skipped with the reason,
// and naming it is an OWNERSHIP_VALIDATION_ERROR.
func Stop(runDir, name string, grace time.Duration) (*StopResult, error) {
	res := &StopResult{Stopped: []int{}, Skipped: []Skipped{}}
	var named *Skipped
	found := name == ""
	err := withRegistry(runDir, func(reg *Registry) error {
		for i := range reg.Processes {
			r := &reg.Processes[i]
			if name != "" && r.Name != name {
				continue
			}
			found = true
			if r.StoppedAt != "" {
				continue
			}
			if why := r.Verify(runDir); why != "" {
				sk := Skipped{PID: r.PID, Name: r.Name, Reason: why}
				res.Skipped = append(res.Skipped, sk)
				if name != "" {
					named = &sk
				}
				if strings.Contains(why, "is gone") {
					r.StoppedAt, r.Stop = now(), "exited on its own"
				}
				continue
			}
			r.Stop = terminate(r.PGID, r.PID, grace)
			r.StoppedAt = now()
			res.Stopped = append(res.Stopped, r.PID)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if !found {
		return res, caperr.New(caperr.InvalidInput, "the run started no server named %q", name)
	}
	if named != nil && !strings.Contains(named.Reason, "is gone") {
		return res, caperr.New(caperr.OwnershipValidationError, "refused to signal %s: %s", name, named.Reason)
	}
	return res, nil
}

// terminate sends SIGTERM to the group, then SIGKILL after grace; a
// confined server's whole sandbox (daemonized children too).
func terminate(pgid, pid int, grace time.Duration) string {
	if sandbox.Leads(pid) {
		return sandbox.Stop(pid, grace, func() bool { return alive(pid) })
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return "SIGTERM"
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for i := 0; i < 40 && alive(pid); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	return "SIGKILL after " + grace.String()
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	_, err := startTicks(pid)
	return err == nil
}

func now() string { return envelope.Timestamp(time.Now()) }
