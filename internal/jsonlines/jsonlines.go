// Package jsonlines reads newline-delimited JSON (MCP's stdio framing) a
// whole line at a time, each checked to be one JSON value before a
// decoder sees it: a stream decoder given a line cut short waits for the
// rest, and the next line then breaks the stream for good.
package jsonlines

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Reader hands on r's lines that are JSON values (blank lines pass). A
// line that is not one, or longer than Max bytes, goes to Bad: its error
// ends the reading; nil passes the line over.
type Reader struct {
	r    *bufio.Reader
	max  int
	bad  func(reason string) error
	left []byte
}

// New reads r.
func New(r io.Reader, max int, bad func(reason string) error) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max, bad: bad}
}

func (l *Reader) Read(p []byte) (int, error) {
	for len(l.left) == 0 {
		line, long, err := l.readLine()
		switch t := bytes.TrimSpace(line); {
		case long:
			if berr := l.bad(fmt.Sprintf("a line of more than %d bytes", l.max)); berr != nil {
				return 0, berr
			}
		case len(t) > 0 && !json.Valid(t):
			if berr := l.bad("a line that is not one whole JSON value"); berr != nil {
				return 0, berr
			}
		default:
			l.left = line
		}
		if len(l.left) == 0 && err != nil {
			return 0, err
		}
	}
	n := copy(p, l.left)
	l.left = l.left[n:]
	return n, nil
}

// readLine reads up to and with the next newline (the stream's last line
// may lack it); a line past max is read to its end and dropped (long).
func (l *Reader) readLine() (line []byte, long bool, err error) {
	for {
		frag, err := l.r.ReadSlice('\n')
		if !long {
			line = append(line, frag...)
			if len(line) > l.max {
				line, long = nil, true
			}
		}
		if err != bufio.ErrBufferFull {
			return line, long, err
		}
	}
}
