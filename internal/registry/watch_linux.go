package registry

import (
	"os"

	"golang.org/x/sys/unix"
)

// watcher is an inotify instance watching folders for any change of
// their entries or of the entries' contents. It is read without waiting:
// changed reports what the kernel queued before the call. Its *os.File
// owns the descriptor: closed once, and by the file's finalizer when a
// memo is dropped while it watches (a user's inotify instances are few).
type watcher struct {
	f *os.File
}

// watchMask is every change of a folder's entries, their contents or
// their metadata, and of the folder itself.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newWatcher watches dirs, or is nil when it cannot watch them all (no
// inotify, the user's watch limit): loads then discover every time.
func newWatcher(dirs []string) *watcher {
	if len(dirs) == 0 {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, watchMask); err != nil {
			_ = unix.Close(fd)
			return nil
		}
	}
	return &watcher{f: os.NewFile(uintptr(fd), "inotify")}
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
func (w *watcher) close() { _ = w.f.Close() }
