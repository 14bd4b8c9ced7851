package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/childproc"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/jq"
	"github.com/capflow/capflow/internal/schema"
)

func init() {
	// Pure unless they read or write a file.
	// json.query evaluates in a child process: one is kept ready.
	registerPure("json.query", jsonQuery, pureFunc{ok: func(in map[string]any) bool { return in["path"] == nil },
		ready: func(map[string]any) bool { return jq.Ready(int64(evalMemory)) },
		clock: func(in map[string]any) bool { return readsClock.MatchString(str(in, "query")) }})
	registerPure("text.render", textRender, pureFunc{ok: func(in map[string]any) bool { return in["output_path"] == nil },
		ready: func(in map[string]any) bool {
			return !hasAction(str(in, "template")) || textChildren.Ready(int64(evalMemory))
		}})
}

// readsClock matches a query that may call jq's now (a field or variable
// of that name aside; a string holding the word too, which costs only the
// inline path): its result is the time it runs at, not its inputs'.
var readsClock = regexp.MustCompile(`(^|[^.$\w])now\b`)

// maxQuery bounds a query's text: gojq parses a megabyte in up to half a
// second of CPU that no budget watches, 16 MB in seven (found attacking
// issue 57); a query is a few lines.
const maxQuery = 1 << 20

func jsonQuery(ctx context.Context, in map[string]any, env *Env) (any, error) {
	if q := str(in, "query"); len(q) > maxQuery {
		return nil, caperr.New(caperr.InvalidInput, "query: %s, more than %s", humanBytes(int64(len(q))), humanBytes(maxQuery))
	}
	// The query is parsed, and a file's JSON decoded, in the child alone:
	// in the worker a 1 MiB query took 300 MB and a second, outside any
	// budget (found attacking issue 57).
	var results []any
	var err error
	switch {
	case in["path"] != nil:
		b, _, pl, rerr := env.readRegular(ctx, "path", str(in, "path"), MaxRead+1)
		if rerr != nil {
			return nil, rerr
		}
		if len(b) > MaxRead {
			return nil, caperr.New(caperr.InvalidInput, "path %q is larger than %s", pl.given, humanBytes(MaxRead))
		}
		if !json.Valid(b) {
			return nil, caperr.New(caperr.InvalidInput, "%s is not JSON", pl.given)
		}
		results, err = jq.EvalJSON(ctx, str(in, "query"), b, int64(evalMemory), evalTime)
	default:
		results, err = jq.Eval(ctx, str(in, "query"), schema.Normalize(in["input"]), int64(evalMemory), evalTime)
	}
	if err != nil {
		return nil, queryErr(ctx, str(in, "query"), err)
	}
	env.Feedback.Info("query", fmt.Sprintf("%d results", len(results)))
	var first any
	if len(results) > 0 {
		first = results[0]
	}
	data := map[string]any{"result": first, "results": results, "count": len(results)}
	// What no reader keeps, as in a tool's data: a number past float64
	// (tonumber of 400 digits), nesting past 200 levels (fromjson).
	if err := envelope.CheckData(data); err != nil {
		return nil, caperr.New(caperr.InvalidInput, "query %q: %s", str(in, "query"), err)
	}
	return data, nil
}

// queryErr maps how a json.query evaluation failed to the contract's codes.
func queryErr(ctx context.Context, query string, err error) error {
	var qe *jq.QueryError
	what := fmt.Sprintf("query %q", query)
	switch {
	case ctx.Err() != nil:
		return ctxErr(ctx, what)
	case errors.As(err, &qe):
		return caperr.New(caperr.InvalidInput, "%s: %s", what, qe.Msg)
	case errors.Is(err, jq.ErrTooMany), errors.Is(err, jq.ErrTooLarge):
		return caperr.New(caperr.InvalidInput, "%s %s", what, err)
	}
	return evalErr(ctx, what, err)
}

// evalErr maps how an evaluation in a child (childproc) failed to the
// contract's codes: the step's end, the child's memory, its time.
func evalErr(ctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, childproc.ErrBusy):
		return ctxErr(ctx, what+": every evaluator was busy with other steps until the step's time ended")
	case ctx.Err() != nil:
		return ctxErr(ctx, what)
	case errors.Is(err, childproc.ErrMemory):
		return caperr.New(caperr.ResourceExhausted, "%s needs more than %s of memory (the memory limit): stopped", what, humanBytes(int64(evalMemory)))
	case errors.Is(err, context.DeadlineExceeded):
		return overTime(what)
	}
	return caperr.Wrap(caperr.InternalError, err, "%s", what)
}

// mapScalars rebuilds a JSON-like value with f applied to every scalar.
func mapScalars(v any, f func(any) any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = mapScalars(x, f)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = mapScalars(x, f)
		}
		return out
	}
	return f(v)
}

// Bounds of text.render: output size, and the iterations a template may
// ask for with literal numbers (text/template ranges over integers and
// cannot be interrupted, so the bound is checked before it runs).
const (
	MaxRender       = 4 << 20
	maxRangeLiteral = 10000
	maxRangeProduct = 1000000
)

func textRender(ctx context.Context, in map[string]any, env *Env) (any, error) {
	values, _ := in["values"].(map[string]any)
	if values == nil {
		values = map[string]any{}
	}
	text, err := render(ctx, str(in, "template"), values)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"text": text, "bytes": len(text)}
	if op := str(in, "output_path"); op != "" {
		pl, err := env.writePlace("output_path", op)
		if err != nil {
			return nil, err
		}
		defer pl.Close()
		if err := env.replace(ctx, pl, boolean(in, "overwrite"), func(w io.Writer) error {
			_, err := io.WriteString(w, text)
			return err
		}); err != nil {
			return nil, err
		}
		out["path"] = pl.abs
	}
	env.Feedback.Info("render", fmt.Sprintf("rendered %d bytes", len(text)))
	return out, nil
}

// parseTemplate reads a template's text within its bounds; its functions
// read their budget from live.
func parseTemplate(src string, live *context.Context) (*template.Template, error) {
	if err := checkSource(src); err != nil {
		return nil, err
	}
	tmpl, err := template.New("text").Option("missingkey=error").Funcs(textFuncs(live)).Parse(src)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "") // it says "template: ..."
	}
	return tmpl, checkTemplate(tmpl)
}

// renderTemplate renders a template, within its bounds and budget: what a
// text child does with a request (textchild.go).
func renderTemplate(ctx context.Context, src string, values map[string]any) (string, error) {
	live := ctx // the budget's, once the template runs (textFuncs)
	tmpl, err := parseTemplate(src, &live)
	if err != nil {
		return "", err
	}
	ticks(tmpl)
	large, err := scanValues(values)
	if err != nil {
		return "", err
	}
	if large {
		values, _ = unrangeable(values).(map[string]any)
	}
	// In its child (textchild.go), a template runs on the one goroutine:
	// the ticks stop it at its time, the kernel's cap at its memory, and
	// its worker kills the child when neither does.
	bctx, stop := context.WithTimeout(ctx, evalTime)
	defer stop()
	live = bctx
	buf := &boundedBuffer{ctx: bctx, max: MaxRender}
	err = execute(tmpl, buf, values)
	if berr := budgetErr(ctx, bctx, "template"); berr != nil {
		return "", berr
	}
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return "", caperr.New(caperr.InvalidInput, "rendered text is larger than %s", humanBytes(MaxRender))
		}
		return "", caperr.Wrap(caperr.InvalidInput, err, "render")
	}
	return buf.String(), nil
}

var errTooLarge = errors.New("output too large")

// execute runs a parsed template; a panic in it is its error.
func execute(tmpl *template.Template, w io.Writer, values map[string]any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("template panicked: %v", p)
		}
	}()
	return tmpl.Execute(w, values)
}

// boundedBuffer stops a template once it has written max bytes or its
// context has ended (a template cannot be interrupted otherwise).
type boundedBuffer struct {
	ctx context.Context
	max int
	mu  sync.Mutex
	b   bytes.Buffer
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.b.Write(p)
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// checkRanges refuses ranges over literal numbers past maxRangeLiteral,
// and nested ones whose product passes maxRangeProduct.
func checkRanges(n parse.Node, outer int) error {
	switch t := n.(type) {
	case *parse.ListNode:
		if t == nil {
			return nil
		}
		for _, c := range t.Nodes {
			if err := checkRanges(c, outer); err != nil {
				return err
			}
		}
	case *parse.IfNode:
		return firstErr(checkRanges(t.List, outer), checkRanges(t.ElseList, outer))
	case *parse.WithNode:
		return firstErr(checkRanges(t.List, outer), checkRanges(t.ElseList, outer))
	case *parse.RangeNode:
		count := 1
		if t.Pipe != nil && len(t.Pipe.Cmds) == 1 && len(t.Pipe.Cmds[0].Args) == 1 {
			if num, ok := t.Pipe.Cmds[0].Args[0].(*parse.NumberNode); ok {
				v := num.Float64
				if num.IsInt {
					v = float64(num.Int64)
				}
				if v > maxRangeLiteral {
					return caperr.New(caperr.InvalidInput, "template: range over %s: at most %d iterations", num.Text, maxRangeLiteral)
				}
				count = max(int(v), 1)
			}
		}
		if outer*count > maxRangeProduct {
			return caperr.New(caperr.InvalidInput, "template: nested ranges ask for more than %d iterations", maxRangeProduct)
		}
		return firstErr(checkRanges(t.List, outer*count), checkRanges(t.ElseList, outer))
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// unrangeable turns integers past maxRangeLiteral in the values into
// json.Number: printed the same, but a template cannot range over them.
func unrangeable(v any) any {
	return mapScalars(v, func(x any) any {
		switch t := x.(type) {
		case int64:
			if t > maxRangeLiteral {
				return json.Number(strconv.FormatInt(t, 10))
			}
		case int:
			if t > maxRangeLiteral {
				return json.Number(strconv.Itoa(t))
			}
		case uint64:
			if t > maxRangeLiteral {
				return json.Number(strconv.FormatUint(t, 10))
			}
		}
		return x
	})
}
