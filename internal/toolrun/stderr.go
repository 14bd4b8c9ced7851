package toolrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/hashicorp/go-hclog"
)

// readStderr splits stderr into feedback events (JSON objects with phase,
// level and message) and plain log lines; lines are bounded so a tool
// printing megabytes without a newline cannot exhaust memory.
func readStderr(r io.Reader, logFile io.Writer, red *envelope.Redactor, tail *tailBuffer, onEvent func(envelope.Feedback), onLine func(string), log hclog.Logger) {
	br := bufio.NewReaderSize(r, 64<<10)
	// The log is written a buffer at a time, and whenever the tool has
	// paused (no whole line read and waiting): a write a line cost the
	// worker 10 s of CPU for 8 MiB of empty lines (found re-attacking
	// issue 57).
	var bw *bufio.Writer
	if logFile != nil {
		bw = bufio.NewWriterSize(logFile, 64<<10)
		defer bw.Flush()
	}
	trace := log.IsTrace()
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			text := append([]byte(nil), line...)
			cut := false
			for isPrefix && err == nil {
				// Drop the rest of an over-long line.
				_, isPrefix, err = br.ReadLine()
				text, cut = text[:min(len(text), 64<<10)], true
			}
			if cut {
				// Masked as cut: a secret the cut split is not found whole.
				text = append([]byte(red.Cut(string(text))), " …[line truncated]"...)
			} else {
				text = red.Bytes(text)
			}
			if f, ok := parseEvent(text); ok {
				// Decoded text too: a secret may hide behind \u escapes.
				f.Phase, f.Message, f.Detail = red.String(f.Phase), red.String(f.Message), red.String(f.Detail)
				onEvent(f)
			} else {
				withNL := append(text, '\n')
				if bw != nil {
					bw.Write(withNL)
				}
				tail.Write(withNL)
				if trace {
					log.Trace("tool stderr", "line", string(text))
				}
				if onLine != nil {
					onLine(string(text))
				}
			}
		}
		if err != nil {
			return
		}
		if bw != nil && !lineWaiting(br) {
			bw.Flush()
		}
	}
}

// eventLevels reads a stderr event's level as loggers write it: any case,
// and their other words for the three (a "debug" event was a plain line,
// and nothing said why).
var eventLevels = map[string]string{
	"info": envelope.LevelInfo, "debug": envelope.LevelInfo, "trace": envelope.LevelInfo, "notice": envelope.LevelInfo,
	"warning": envelope.LevelWarning, "warn": envelope.LevelWarning,
	"error": envelope.LevelError, "err": envelope.LevelError, "fatal": envelope.LevelError, "critical": envelope.LevelError,
}

func parseEvent(line []byte) (envelope.Feedback, bool) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return envelope.Feedback{}, false
	}
	var f envelope.Feedback
	if json.Unmarshal(t, &f) != nil || f.Phase == "" || f.Message == "" {
		return envelope.Feedback{}, false
	}
	level, ok := eventLevels[strings.ToLower(f.Level)]
	if !ok {
		return envelope.Feedback{}, false
	}
	f.Level = level
	if _, ok := envelope.ReadTime(f.Timestamp); !ok {
		// Stamped now when it has no time capflow reads: feedback stays
		// in order, where an unread time made each later insertion scan
		// every entry (found attacking issue 57).
		f.Timestamp = envelope.Timestamp(envelope.Now())
	}
	return f, true
}

// lineWaiting reports whether a whole line is read and waits in br: when
// none does, the tool has paused (or is writing a line slowly, a progress
// bar's), and what was logged so far is flushed.
func lineWaiting(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}
