//go:build !linux

package sandbox

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"time"
)

// Support is what this machine offers for confinement: nothing but Linux.
type Support struct{}

// Tree is a confined process tree (never, here).
type Tree struct{}

// Probe reports that confinement needs Linux.
func Probe() *Support { return &Support{} }

// Unavailable is a Support that cannot confine.
func Unavailable(string) *Support { return &Support{} }

// Missing says why this machine cannot confine a tool.
func (s *Support) Missing() string { return "confinement needs Linux (namespaces, cgroups)" }

// Controllers lists no cgroup controllers.
func (s *Support) Controllers() []string { return nil }

// Summary is one line for the worker's start-up log.
func (s *Support) Summary() string { return "unconfined: " + s.Missing() }

// Drain has nothing to drain here.
func (s *Support) Drain() {}

// Settle has nothing to wait for without a sandbox.
func (s *Support) Settle() {}

// Warm has no zygote to start here.
func (s *Support) Warm() {}

// Ways a step is confined (never, here).
const (
	WayZygote     = "zygote"
	WayBubblewrap = "bubblewrap"
)

// Stdio are the standard streams of a tree started with Start.
type Stdio struct {
	In        io.Reader
	Out, Err  io.Writer
	WaitDelay time.Duration
}

// Start always fails here.
func (s *Support) Start(Request, Stdio) (*Tree, error) { return nil, errors.New(s.Missing()) }

func (t *Tree) Wait() (int, error) { return -1, errors.New("no sandbox here") }
func (t *Tree) Way() string        { return "" }

// Command always fails here.
func (s *Support) Command(Request) (*exec.Cmd, *Tree, error) {
	return nil, nil, errors.New(s.Missing())
}

func (t *Tree) Start() error                             { return nil }
func (t *Tree) AfterStart(f func())                      { f() }
func (t *Tree) Pid() int                                 { return 0 }
func (t *Tree) Terminate(time.Duration, <-chan struct{}) {}
func (t *Tree) Abort()                                   {}
func (t *Tree) Kill()                                    {}
func (t *Tree) Finish(int, string) *Breach               { return nil }

// Leads is false: no tree was ever confined here.
func Leads(int) bool { return false }

// Stop does nothing: no tree was ever confined here.
func Stop(int, time.Duration, func() bool) string { return "" }

// SweepOrphans finds nothing to sweep.
func SweepOrphans() []int { return nil }

// DialInside, Listening and Ended: no tree has a namespace here.
func (t *Tree) DialInside(uint16) (net.Conn, error) { return nil, errors.New("no sandbox here") }
func (t *Tree) Listening() ([]uint16, error)        { return nil, errors.New("no sandbox here") }
func (t *Tree) Ended() <-chan struct{}              { return nil }
