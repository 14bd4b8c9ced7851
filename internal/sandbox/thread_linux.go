package sandbox

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// ownThread runs f locked to a thread of its own that is never the
// process's main thread, and never unlocks it: the thread ends with f,
// and with it whatever f changed of it (its cgroups, its network
// namespace). On the main thread it hands f to another goroutine first,
// holding the main thread locked until that one has its own: the runtime
// parks the main thread when its locked goroutine returns rather than
// ending it, and the main thread is the process's /proc/PID (its ns/net,
// what a tool addressing the worker by its pid sees).
func ownThread(f func()) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		held := make(chan struct{})
		go ownThread(func() { close(held); f() })
		<-held
		runtime.UnlockOSThread()
		return
	}
	f()
}
