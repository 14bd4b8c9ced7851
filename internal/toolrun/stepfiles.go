package toolrun

import (
	"io"
	"os"
	"syscall"
)

// The files the worker writes in a command step's folder.

// writeInput writes the input file and returns it open at its start: the
// tool's stdin, with no pipe and no goroutine to copy it there.
func writeInput(path string, data []byte) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// logFile is a step's log file, created at its first write (removing
// any earlier one at once).
type logFile struct {
	path string
	f    *os.File
	err  error
}

func newLogFile(path string) *logFile {
	_ = os.Remove(path)
	return &logFile{path: path}
}

func (l *logFile) Write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		// The tool may have put something of its own there by now (it
		// writes in this folder): a link is never followed, a file never
		// replaced, and the log is then not written.
		l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.f.Write(p)
}

func (l *logFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
