package registry

import (
	"os"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// maxWatchers bounds the inotify instances memos hold in one process (a
// user has 128 by default, shared with every other program of theirs).
const maxWatchers = 8

// watchers counts the instances memos hold now.
var watchers atomic.Int32

// watcher is an inotify instance watching folders for any change of
// their entries or of the entries' contents. It is read without waiting:
// changed reports what the kernel queued before the call. Its *os.File
// owns the descriptor: closed once, and by the file's finalizer when a
// memo is dropped while it watches. (Never call its Fd: that would make
// the descriptor blocking, and changed would wait.)
type watcher struct {
	f     *os.File
	taken *atomic.Bool // counted in watchers until closed or collected
}

// watchMask is every change of a folder's entries, their contents or
// their metadata, and of the folder itself.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newWatcher watches dirs, or is nil when it cannot watch them all (no
// inotify, the user's or this process's limits): loads then discover
// every time.
func newWatcher(dirs []string) *watcher {
	if len(dirs) == 0 || watchers.Add(1) > maxWatchers {
		watchers.Add(-1)
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		watchers.Add(-1)
		return nil
	}
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, watchMask); err != nil {
			_ = unix.Close(fd)
			watchers.Add(-1)
			return nil
		}
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), taken: new(atomic.Bool)}
	w.taken.Store(true)
	runtime.AddCleanup(w, release, w.taken)
	return w
}

// release gives a closed or collected watcher's count back, once.
func release(taken *atomic.Bool) {
	if taken.Swap(false) {
		watchers.Add(-1)
	}
}

// changed reports whether anything was queued since the watch began: an
// event, an overflow of the queue, or a watch the kernel dropped (its
// folder removed). A read that fails otherwise counts as a change.
func (w *watcher) changed() bool {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return true
	}
	var buf [unix.SizeofInotifyEvent + unix.NAME_MAX + 1]byte
	n, rerr := 0, error(nil)
	// One read, never a wait: returning true ends RawConn.Read's loop.
	if err := rc.Read(func(fd uintptr) bool { n, rerr = unix.Read(int(fd), buf[:]); return true }); err != nil {
		return true
	}
	return n > 0 || rerr != unix.EAGAIN
}

// close ends the watch.
func (w *watcher) close() {
	_ = w.f.Close()
	release(w.taken)
}
