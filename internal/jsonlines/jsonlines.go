// Package jsonlines reads newline-delimited JSON-RPC (MCP's stdio framing)
// a whole line at a time, each checked to be one JSON-RPC 2.0 message
// before a decoder sees it: a stream decoder given a line cut short waits
// for the rest (and the next line then breaks the stream for good), and
// the MCP SDK ends a session on a line that is JSON but no message.
package jsonlines

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// A Fault is what is wrong with a line: Code is JSON-RPC's (-32700 not
// JSON, -32600 not a request), ID the line's id when it has one.
type Fault struct {
	Code   int
	Reason string
	ID     json.RawMessage
	// Response: the line answers a request (its id is the request's).
	Response bool
}

// Reader hands on r's lines that are JSON-RPC messages, trimmed (blank
// lines pass). A line that is not one, or longer than max bytes, goes to
// bad: its error ends the reading; nil passes the line over. With Answer
// set, a bad line that answers a request (its id read from as much of it
// as parses) is handed on as an error answer to that request instead:
// one bad answer fails its own call, not every call of the stream.
type Reader struct {
	r      *bufio.Reader
	max    int
	bad    func(Fault) error
	left   []byte
	Answer bool
}

// New reads r.
func New(r io.Reader, max int, bad func(Fault) error) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max, bad: bad}
}

func (l *Reader) Read(p []byte) (int, error) {
	for len(l.left) == 0 {
		line, long, err := l.readLine()
		t := bytes.TrimSpace(line)
		var f *Fault
		if long {
			f = &Fault{Code: -32700, Reason: fmt.Sprintf("a line of more than %d bytes", l.max)}
		} else if len(t) > 0 {
			f = Check(t)
		}
		switch {
		case f != nil && l.Answer && f.Response && plainID(f.ID) != nil && string(f.ID) != "null":
			l.left = errorAnswer(*f)
		case f != nil:
			if berr := l.bad(*f); berr != nil {
				return 0, berr
			}
		case len(t) > 0:
			l.left = append(t, '\n')
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

// MaxDepth is the deepest nesting a line may have (the MCP SDK refuses
// past 1000, ending the session).
const MaxDepth = 900

// Check says what is wrong with line as a JSON-RPC 2.0 message (or a
// batch of them), nil when nothing is.
func Check(line []byte) *Fault {
	if !json.Valid(line) {
		id, response := leading(line)
		return &Fault{Code: -32700, Reason: "a line that is not one whole JSON value", ID: id, Response: response}
	}
	if depth(line) > MaxDepth {
		return &Fault{Code: -32700, Reason: fmt.Sprintf("JSON nested more than %d deep", MaxDepth)}
	}
	var msgs []json.RawMessage
	if line[0] == '[' {
		if json.Unmarshal(line, &msgs) != nil || len(msgs) == 0 {
			return &Fault{Code: -32600, Reason: "an empty batch, or one that is not a list of messages"}
		}
	} else {
		msgs = []json.RawMessage{line}
	}
	for _, m := range msgs {
		if f := checkMessage(m); f != nil {
			return f
		}
	}
	return nil
}

func checkMessage(raw json.RawMessage) *Fault {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return &Fault{Code: -32600, Reason: "a message that is not a JSON object"}
	}
	id := m["id"]
	_, isResult := m["result"]
	_, isError := m["error"]
	response := (isResult || isError) && m["method"] == nil
	if string(m["jsonrpc"]) != `"2.0"` {
		return &Fault{Code: -32600, Reason: `a message without "jsonrpc": "2.0"`, ID: plainID(id), Response: response}
	}
	if id != nil && plainID(id) == nil {
		return &Fault{Code: -32600, Reason: "an id that is not a string, an integer or null"}
	}
	if meth, ok := m["method"]; ok {
		var s string
		if json.Unmarshal(meth, &s) != nil || s == "" {
			return &Fault{Code: -32600, Reason: "a method that is not a string", ID: id}
		}
	} else if m["result"] == nil && m["error"] == nil {
		return &Fault{Code: -32600, Reason: "a message with no method, result or error", ID: id}
	}
	return nil
}

// plainID is id when it is a string, an integer or null.
func plainID(id json.RawMessage) json.RawMessage {
	var s string
	var n int64
	if id == nil || string(id) == "null" || json.Unmarshal(id, &s) == nil || json.Unmarshal(id, &n) == nil {
		return id
	}
	return nil
}

// depth is how deep line's arrays and objects nest (line is valid JSON).
func depth(line []byte) int {
	d, most, inString, escaped := 0, 0, false, false
	for _, c := range line {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			most = max(most, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return most
}

// leading reads as much of a line cut short (or otherwise broken) as
// parses, for its id and whether it answers a request ("result" or
// "error" before any "method").
func leading(line []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var id json.RawMessage
	response := false
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			break
		}
		switch key {
		case "id":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return id, response
			}
			id = plainID(raw)
			continue
		case "result", "error":
			response = true
		case "method":
			return id, false
		}
		if response && id != nil {
			return id, true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return id, response
}

// OutOfContract starts the message of the error answer that stands for a
// bad answer (Reader.Answer).
const OutOfContract = "the server answered out of contract: "

// errorAnswer is the error answer that stands for a bad answer.
func errorAnswer(f Fault) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": f.ID,
		"error": map[string]any{"code": f.Code, "message": OutOfContract + f.Reason}})
	return append(b, '\n')
}
