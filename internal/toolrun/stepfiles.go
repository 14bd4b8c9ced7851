package toolrun

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The files the worker writes in a command step's folder.

// openDir takes a folder's handle once, never through a link: what the
// worker writes and reads there is opened beneath it (openBeneath), so a
// tool that swaps the folder's path for a link meanwhile moves nothing.
func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
}

// openBeneath opens name in the folder dir holds, never through a link.
func openBeneath(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	fd, err := syscall.Openat(int(dir.Fd()), name, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}

// writeInput writes the input file beneath dir and returns the tool's
// stdin: a sealed copy in memory, never the file, which is the engine's
// record of what the step was given (found attacking: reopened through
// /proc/self/fd/0, a file given as stdin is its own, writable mount's,
// and a worker that is not root owns it as its tool does). An earlier
// attempt's file is removed first and a new one made (O_EXCL): a hard
// link or a FIFO a tool left under its name is never written or waited
// on.
func writeInput(dir *os.File, name string, data []byte) (*os.File, error) {
	_ = unix.Unlinkat(int(dir.Fd()), name, 0)
	f, err := openBeneath(dir, name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return sealedCopy(name, data)
}

// writeInputIn writes the input file in the step folder (wd, its handle)
// or, where the run keeps one, in the step's records folder (the
// engine's, out of the tool's sight), created if missing.
func writeInputIn(wd *os.File, records string, data []byte) (*os.File, error) {
	if records == "" {
		return writeInput(wd, InputFile, data)
	}
	if err := os.MkdirAll(records, 0o755); err != nil {
		return nil, err
	}
	dir, err := openDir(records)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return writeInput(dir, InputFile, data)
}

// logFile is a step's log file, created at its first write (removing
// any earlier one at once), kept to MaxLogFile bytes: the worker writes
// it, outside the tool's own limits on what it writes.
type logFile struct {
	dir              *os.File // the step folder's handle
	name             string
	f                *os.File
	err              error
	written, dropped int64
	last             byte // the last byte written
}

// MaxLogFile bounds a step's stdout.log and stderr.log; what comes after is
// counted, and the count is the log's last line.
const MaxLogFile = 64 << 20

func newLogFile(dir *os.File, name string) *logFile {
	_ = unix.Unlinkat(int(dir.Fd()), name, 0)
	return &logFile{dir: dir, name: name}
}

func (l *logFile) Write(p []byte) (int, error) {
	// Past the bound, nothing more: a log with a gap in it would read as
	// whole.
	if l.dropped > 0 || l.written+int64(len(p)) > MaxLogFile {
		l.dropped += int64(len(p))
		return len(p), nil
	}
	return l.write(p)
}

func (l *logFile) write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		// The tool may have put something of its own there by now (it
		// writes in this folder): a link is never followed, a file never
		// replaced, and the log is then not written. Beneath the handle
		// taken before the tool started: a folder it swapped in for the
		// step folder's path gets nothing.
		l.f, l.err = openBeneath(l.dir, l.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.f.Write(p)
	l.written += int64(n)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

func (l *logFile) Close() error {
	if l.dropped > 0 {
		nl := ""
		if l.written > 0 && l.last != '\n' {
			nl = "\n" // on a line of its own
		}
		_, _ = l.write(fmt.Appendf(nil, "%s[capflow: %s stopped at %d MiB; %d bytes more were not kept]\n", nl, l.name, MaxLogFile>>20, l.dropped))
	}
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
