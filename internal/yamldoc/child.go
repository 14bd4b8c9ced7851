package yamldoc

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/childproc"
)

// A document past childBytes is read in a child process (childproc), as a
// template is rendered and a jq query run: four rounds of attacks on
// go-yaml each found inputs that passed every bound checked before it
// (prescan, checkTokens) and still took minutes or all the memory there
// was. In a child, what the bounds miss costs the child, under the
// kernel's address-space cap and a time limit, never the worker, the
// console or the CLI. A smaller document is read in place: the worst an
// attack found there cost 0.1 s and 140 MB (a 32 KB key above 4,000
// values, held by MaxPlaceBytes).
const (
	childBytes = 64 << 10
	// maxAnswer bounds a child's answer: the tree of a 4 MiB document.
	maxAnswer = 512 << 20
)

// A child's memory and time (a 40,000-step plan reads in under 2 s).
var (
	childMemory int64 = 1 << 30
	childTime         = 30 * time.Second
)

var readers = childproc.New("capflow-yaml-child", maxAnswer)

func init() { readers.Enter(readAnswer) }

// readRequest is one document for a child to read.
type readRequest struct {
	File    string
	Data    []byte
	Lenient bool
}

// readReply is a child's reading: the document, or why not.
type readReply struct {
	Doc *Doc
	Err *caperr.Error
}

// readAnswer is the child's side: the document read here.
func readAnswer(req []byte) []byte {
	var r readRequest
	var reply readReply
	if err := gob.NewDecoder(bytes.NewReader(req)).Decode(&r); err != nil {
		reply.Err = caperr.New(caperr.InternalError, "the YAML reader's request: %v", err)
	} else if doc, err := parseHere(r.File, r.Data, r.Lenient); err != nil {
		reply.Err = asCaperr(err, r.File)
	} else {
		reply.Doc = doc
	}
	var out bytes.Buffer
	if err := gob.NewEncoder(&out).Encode(reply); err != nil {
		out.Reset()
		_ = gob.NewEncoder(&out).Encode(readReply{Err: caperr.New(caperr.InternalError, "the YAML reader's answer: %v", err)})
	}
	return out.Bytes()
}

// asCaperr is err as a *caperr.Error, without what gob cannot carry (a
// wrapped error: its text is in the message).
func asCaperr(err error, file string) *caperr.Error {
	var ce *caperr.Error
	if !errors.As(err, &ce) {
		return caperr.New(caperr.InvalidInput, "%v", err).At(file, 0, 0, "")
	}
	c := *ce
	if c.Err != nil {
		c.Message, c.Err = ce.Error(), nil
	}
	return &c
}

// parse reads a document in place when it is small, else in a child.
func parse(file string, data []byte, lenient bool) (*Doc, error) {
	if len(data) <= childBytes || len(data) > MaxFileSize {
		return parseHere(file, data, lenient)
	}
	var req bytes.Buffer
	if err := gob.NewEncoder(&req).Encode(readRequest{File: file, Data: data, Lenient: lenient}); err != nil {
		return nil, caperr.Wrap(caperr.InternalError, err, "the YAML reader's request").At(file, 0, 0, "")
	}
	b, err := readers.Ask(context.Background(), childMemory, req.Bytes(), childTime)
	switch {
	case errors.Is(err, childproc.ErrMemory), errors.Is(err, childproc.ErrTooLarge):
		return nil, caperr.New(caperr.InvalidInput, "reading it as YAML needs more than %s: split the document, or write its large parts as JSON", sizeText(childMemory)).At(file, 0, 0, "")
	case errors.Is(err, context.DeadlineExceeded):
		return nil, caperr.New(caperr.InvalidInput, "reading it as YAML took more than %s: split the document, or write its large parts as JSON", childTime).At(file, 0, 0, "")
	case err != nil:
		return nil, caperr.Wrap(caperr.InternalError, err, "the YAML reader").At(file, 0, 0, "")
	}
	var reply readReply
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&reply); err != nil {
		return nil, caperr.Wrap(caperr.InternalError, err, "the YAML reader's answer").At(file, 0, 0, "")
	}
	if reply.Err != nil {
		return nil, reply.Err
	}
	return reply.Doc, nil
}
