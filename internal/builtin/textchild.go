package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/childproc"
)

// A template runs in a child process (childproc), as a jq query does:
// text/template offers no allocation hook and cannot be interrupted, and
// each round of attacks on text.render in the worker's own process found
// another construct that spent its memory or a core past the budget
// (docs/security.md). In a child, what the bounds in textbounds.go and
// textfuncs.go miss costs the child, under the kernel's address-space
// cap, and a child still busy when its step gives up is killed. Text
// without an action is itself and stays in the worker.

// textChildren are the template renderers: this executable as
// capflow-text-child.
var textChildren = childproc.New("capflow-text-child", MaxRender+64<<10)

func init() { textChildren.Enter(renderAnswer) }

// renderRequest is one template for a child to render, with what is left
// of its step's time (0: no deadline but EvalTimeout's) and the memory
// budget it renders under.
type renderRequest struct {
	Template string
	Values   map[string]any
	Budget   time.Duration
	Memory   uint64
}

// render is a template's text: the template itself when it holds no
// action, else a child's rendering.
func render(ctx context.Context, src string, values map[string]any) (string, error) {
	if err := checkSource(src); err != nil {
		return "", err
	}
	if !strings.Contains(src, "{{") {
		return src, nil
	}
	req := renderRequest{Template: src, Values: values, Memory: evalMemory}
	if d, ok := ctx.Deadline(); ok {
		req.Budget = max(time.Until(d), time.Millisecond)
	}
	raw, err := encodeRequest(req)
	if err != nil {
		return "", caperr.Wrap(caperr.InvalidInput, err, "values")
	}
	// The child stops at its budget and says why; a little past it, it is
	// killed.
	cctx, cancel := context.WithTimeout(ctx, EvalTimeout+2*time.Second)
	defer cancel()
	b, err := textChildren.Ask(cctx, int64(evalMemory), raw)
	switch {
	case ctx.Err() != nil:
		return "", ctxErr(ctx, "template")
	case errors.Is(err, childproc.ErrMemory):
		return "", caperr.New(caperr.ResourceExhausted, "template needs more than %s of memory (the memory limit): stopped", humanBytes(int64(evalMemory)))
	case errors.Is(err, context.DeadlineExceeded):
		return "", caperr.New(caperr.TaskTimeout, "template ran longer than %s: stopped", EvalTimeout)
	case errors.Is(err, childproc.ErrTooLarge):
		return "", caperr.New(caperr.InvalidInput, "rendered text is larger than %s", humanBytes(MaxRender))
	case err != nil:
		return "", caperr.Wrap(caperr.InternalError, err, "template")
	}
	r := wireReader{b: b}
	if len(b) > 0 && b[0] == 0 {
		r.b = b[1:]
		if text := r.str(); r.err == nil {
			return text, nil
		}
	} else if len(b) > 0 {
		r.b = b[1:]
		code, msg := r.str(), r.str()
		if r.err == nil {
			return "", caperr.New(caperr.Code(code), "%s", msg)
		}
	}
	return "", caperr.New(caperr.InternalError, "template: the renderer's answer is malformed")
}

// encodeRequest encodes req. Values of a type JSON does not decode to (a
// typed slice, say) go as JSON would carry them, numbers as json.Number:
// they print the same.
func encodeRequest(req renderRequest) ([]byte, error) {
	w := wireWriter{b: make([]byte, 0, 64+len(req.Template))}
	w.uvarint(uint64(req.Budget))
	w.uvarint(req.Memory)
	w.str(req.Template)
	if w.value(req.Values) == nil {
		return w.b, nil
	}
	b, err := json.Marshal(req.Values)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var values map[string]any
	if err := dec.Decode(&values); err != nil {
		return nil, err
	}
	req.Values = values
	return encodeRequest(req)
}

func decodeRequest(b []byte) (renderRequest, error) {
	r := wireReader{b: b}
	req := renderRequest{Budget: time.Duration(r.uvarint()), Memory: r.uvarint(), Template: r.str()}
	req.Values, _ = r.value().(map[string]any)
	if r.err == nil && (req.Values == nil || len(r.b) > 0) {
		r.fail()
	}
	return req, r.err
}

// renderAnswer is a text child's answer to one request: 0 and the text,
// or 1, the error's code and its words.
func renderAnswer(raw []byte) []byte {
	req, err := decodeRequest(raw)
	var text string
	if err == nil {
		if req.Memory > 0 {
			evalMemory = req.Memory // one request at a time in a child
		}
		ctx, cancel := context.WithCancel(context.Background())
		if req.Budget > 0 {
			ctx, cancel = context.WithTimeout(ctx, req.Budget)
		}
		text, err = renderTemplate(ctx, req.Template, req.Values)
		cancel()
	}
	w := wireWriter{b: make([]byte, 0, len(text)+16)}
	if err != nil {
		w.b = append(w.b, 1)
		w.str(string(caperr.CodeOf(err)))
		w.str(err.Error())
		return w.b
	}
	w.b = append(w.b, 0)
	w.str(text)
	return w.b
}
