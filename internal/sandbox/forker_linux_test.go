package sandbox

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// The test binary's main goroutine keeps the process's main thread
// (LockOSThread in an init function) and runs what onMain is given, so a
// test can call code on that thread.
func init() { runtime.LockOSThread() }

var onMain = make(chan func())

func TestMain(m *testing.M) {
	code := make(chan int)
	go func() { code <- m.Run() }()
	for {
		select {
		case f := <-onMain:
			f()
		case c := <-code:
			os.Exit(c)
		}
	}
}

// A forker begun on the process's main thread hands over to another
// thread: the runtime parks the main thread when its locked goroutine
// returns, never ends it, so the cgroups it joined could not be removed.
func TestForkerNeverKeepsTheMainThread(t *testing.T) {
	s := support(t)
	cg, err := s.makeCgroup()
	if err != nil {
		t.Fatal(err)
	}
	f := &forker{jobs: make(chan func())}
	moved := make(chan error, 1)
	onMain <- func() { ownThread(func() { f.run(cg.dirs, moved) }) }
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	onMainThread := f.tid == strconv.Itoa(os.Getpid())
	f.stop() // before failing: on the main thread it holds TestMain
	cg.remove()
	if onMainThread {
		t.Fatal("the forker kept the main thread")
	}
	removed(t, cg)
}
