package toolrun

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The files the worker writes in a command step's folder.

// writeInput writes the input file (name in dir, never through a link)
// and returns it open for reading at its start: the tool's stdin, with
// no pipe and no goroutine to copy it there, and no way to write it back.
func writeInput(dir, name string, data []byte) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
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
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// logFile is a step's log file, created at its first write (removing
// any earlier one at once), kept to MaxLogFile bytes: the worker writes
// it, outside the tool's own limits on what it writes.
type logFile struct {
	path             string
	f                *os.File
	err              error
	written, dropped int64
	last             byte // the last byte written
}

// MaxLogFile bounds a step's stdout.log and stderr.log; what comes after is
// counted, and the count is the log's last line.
const MaxLogFile = 64 << 20

func newLogFile(path string) *logFile {
	_ = os.Remove(path)
	return &logFile{path: path}
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
		// replaced, and the log is then not written.
		l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
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
		_, _ = l.write(fmt.Appendf(nil, "%s[capflow: %s stopped at %d MiB; %d bytes more were not kept]\n", nl, filepath.Base(l.path), MaxLogFile>>20, l.dropped))
	}
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
