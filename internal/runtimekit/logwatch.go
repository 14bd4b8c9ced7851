package runtimekit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
)

// errLogTooLong ends a log readiness probe whose log passed maxLogBytes
// with no line matching: nothing more will be read.
var errLogTooLong = errors.New("the log passed 64 MiB with no line matching")

// logWatch reads a growing log incrementally for a readiness pattern:
// each look reads only what was appended since the last one, matched line
// by line, so a server that writes a 200 MB line costs the probe a bounded
// buffer, not a re-read of the whole file every 250 ms.
type logWatch struct {
	path    string
	re      *regexp.Regexp
	offset  int64
	partial []byte // the last line so far, at most maxPartial bytes
}

const maxPartial = 1 << 20

// look returns the first matching line appended since the last look.
func (w *logWatch) look() (string, bool, error) {
	f, err := os.Open(w.path)
	if err != nil {
		return "", false, nil // not there yet
	}
	defer f.Close()
	if _, err := f.Seek(w.offset, io.SeekStart); err != nil {
		return "", false, nil
	}
	buf := make([]byte, 64<<10)
	for w.offset < maxLogBytes {
		n, err := f.Read(buf[:min(int64(len(buf)), maxLogBytes-w.offset)])
		w.offset += int64(n)
		if line, ok := w.feed(buf[:n]); ok {
			return line, true, nil
		}
		if err != nil || n == 0 {
			return "", false, nil
		}
	}
	return "", false, errLogTooLong
}

// feed adds bytes to the partial line and matches every line completed.
func (w *logWatch) feed(b []byte) (string, bool) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := maxPartial - len(w.partial); room > 0 {
			w.partial = append(w.partial, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			// The line is not complete: match what there is, a server may
			// print its ready line without a newline and wait.
			if loc := w.re.FindIndex(w.partial); loc != nil {
				return string(w.partial[loc[0]:loc[1]]), true
			}
			return "", false
		}
		if loc := w.re.FindIndex(w.partial); loc != nil {
			return string(w.partial[loc[0]:loc[1]]), true
		}
		w.partial, b = w.partial[:0], b[i+1:]
	}
	return "", false
}

// tail is the end of a log, for messages: its last 500 bytes.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(its log is empty)"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return "(its log is empty)"
	}
	off := max(st.Size()-500, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	return "log ends: " + string(bytes.TrimSpace(b[:n]))
}
