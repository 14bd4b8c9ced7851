package builtin

import (
	"context"
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

// maxRequest bounds a template's request: a step's inputs are at most
// 64 MiB of JSON (plan.MaxInterpolated), which this encoding does not pass but
// for numbers (a float's 9 bytes), and it is built before it waits for a
// child.
const maxRequest = 64 << 20

// renderRequest is one template for a child to render, with what is left
// of its step's time (0: no deadline but EvalTimeout's).
type renderRequest struct {
	Template string
	Values   map[string]any
	Budget   time.Duration
}

// hasAction reports whether a template's text holds an action: without
// one it renders as itself.
func hasAction(src string) bool { return strings.Contains(src, "{{") }

// render is a template's text: the template itself when it holds no
// action, else a child's rendering.
func render(ctx context.Context, src string, values map[string]any) (string, error) {
	if err := checkSize(src); err != nil {
		return "", err
	}
	if !hasAction(src) {
		return src, nil
	}
	req := renderRequest{Template: src, Values: values}
	if d, ok := ctx.Deadline(); ok {
		req.Budget = max(time.Until(d), time.Millisecond)
	}
	raw, err := encodeRequest(req, maxRequest)
	if errors.Is(err, errTooMuch) {
		return "", caperr.New(caperr.InvalidInput, "values: more than %s to send the template", humanBytes(maxRequest))
	}
	if err != nil {
		return "", caperr.Wrap(caperr.InvalidInput, err, "values")
	}
	// The child stops at its budget and says why; a little past it, it is
	// killed.
	b, err := textChildren.Ask(ctx, int64(evalMemory), raw, evalTime+2*time.Second)
	if errors.Is(err, childproc.ErrTooLarge) && ctx.Err() == nil {
		return "", caperr.New(caperr.InvalidInput, "rendered text is larger than %s", humanBytes(MaxRender))
	}
	if err != nil {
		return "", evalErr(ctx, "template", err)
	}
	text, err := decodeAnswer(b)
	if err == errMalformed {
		return "", caperr.Wrap(caperr.InternalError, err, "template: the renderer's answer")
	}
	return text, err
}

// encodeRequest encodes req, failing past max bytes.
func encodeRequest(req renderRequest, max int) ([]byte, error) {
	w := wireWriter{b: make([]byte, 0, 64+len(req.Template)), max: max}
	w.uvarint(uint64(req.Budget))
	w.str(req.Template)
	if err := w.value(req.Values); err != nil {
		return nil, err
	}
	return w.b, nil
}

func decodeRequest(b []byte) (renderRequest, error) {
	r := wireReader{b: b}
	req := renderRequest{Budget: time.Duration(r.uvarint()), Template: r.str()}
	req.Values, _ = r.value().(map[string]any)
	if r.err == nil && (req.Values == nil || len(r.b) > 0) {
		r.fail()
	}
	return req, r.err
}

// renderAnswer is a text child's answer to one request.
func renderAnswer(raw []byte) []byte {
	req, err := decodeRequest(raw)
	if err != nil {
		return encodeAnswer("", caperr.Wrap(caperr.InternalError, err, "template"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	if req.Budget > 0 {
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), req.Budget)
	}
	defer cancel()
	return encodeAnswer(renderTemplate(ctx, req.Template, req.Values))
}
