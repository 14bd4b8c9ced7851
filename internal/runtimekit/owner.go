package runtimekit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// OwnerEnv carries a server's ownership token in its environment. The
// token is also in the run's record, but a record is only a file: what
// proves that a process is the run's is that the kernel shows the token
// in the environment the process was started with, which nobody can add
// to a process someone else started. A forged or copied processes.json
// therefore never gets another process signalled.
const OwnerEnv = "CAPFLOW_OWNER_TOKEN"

// runKey is a run folder's part of its tokens: a token copied from
// another run's record does not match this run.
func runKey(runDir string) string {
	h := sha256.Sum256([]byte("capflow-run\x00" + runDir))
	return hex.EncodeToString(h[:8])
}

// newToken is a fresh token of the run at runDir.
func newToken(runDir string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return runKey(runDir) + "-" + hex.EncodeToString(b)
}

// environToken reads pid's ownership token from the environment the
// kernel recorded when it started ("" when it has none).
func environToken(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(OwnerEnv+"=")); ok {
			return string(v), nil
		}
	}
	return "", nil
}

// checkToken says why pid does not carry the record's token of this run,
// or "" when it does.
func (r Record) checkToken(runDir string) string {
	switch {
	case r.Token == "":
		return fmt.Sprintf("the record of pid %d has no ownership token (recorded by an older capflow, or edited)", r.PID)
	case !strings.HasPrefix(r.Token, runKey(runDir)+"-"):
		return fmt.Sprintf("the record of pid %d carries another run's token (processes.json edited?)", r.PID)
	}
	tok, err := environToken(r.PID)
	if err != nil {
		return fmt.Sprintf("the environment of pid %d cannot be read: %v", r.PID, err)
	}
	if tok != r.Token {
		return fmt.Sprintf("pid %d does not carry the run's ownership token: it is not a process this run started", r.PID)
	}
	return ""
}

// Sweep stops every process group led by a process that carries one of
// the run's tokens, found through /proc: how a run's servers are stopped
// when its processes.json cannot be read. It returns their pids.
func Sweep(runDir string, grace time.Duration) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := runKey(runDir) + "-"
	var stopped []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		tok, err := environToken(pid)
		if err != nil || !strings.HasPrefix(tok, prefix) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
			continue // a member of a group whose leader is handled
		}
		terminate(pid, pid, grace)
		stopped = append(stopped, pid)
	}
	return stopped
}
