package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/wire"
	"golang.org/x/net/http/httpguts"
)

func init() { register("http.request", httpRequest, Traits{Network: true}) }

const maxHTTPBody = 4 << 20

func httpRequest(ctx context.Context, in map[string]any, env *Env) (any, error) {
	method := strings.ToUpper(str(in, "method"))
	if method == "" {
		method = http.MethodGet
	}
	timeout := time.Duration(integer(in, "timeout_ms", 30000)) * time.Millisecond
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	ctype := ""
	if j, ok := in["json"]; ok {
		b, err := json.Marshal(j)
		if err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "json body")
		}
		body, ctype = bytes.NewReader(b), "application/json"
	} else if s := str(in, "body"); s != "" {
		body = strings.NewReader(s)
	}
	req, err := http.NewRequestWithContext(ctx, method, str(in, "url"), body)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "request")
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if err := setHeaders(req, in); err != nil {
		return nil, err
	}
	// Marks the request as a plan's: capflow's own servers refuse it.
	req.Header.Set(wire.PlanStepHeader, filepath.Base(env.RunDir))
	start := time.Now()
	what := method + " " + str(in, "url")
	hc := env.Rules().Client()
	defer hc.CloseIdleConnections() // a transport of this call's own
	resp, err := hc.Do(req)
	if err != nil {
		return nil, httpErr(outer, ctx, err, what, timeout)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, resp.Body}, maxHTTPBody+1))
	if err != nil {
		return nil, httpErr(outer, ctx, err, what+": reading the response", timeout)
	}
	truncated := len(b) > maxHTTPBody
	if truncated {
		b = b[:maxHTTPBody]
	}
	env.Feedback.AddTimed("request", "info", fmt.Sprintf("%s %s -> %d", method, str(in, "url"), resp.StatusCode), time.Since(start))
	headers := map[string]any{}
	for k := range resp.Header {
		headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	out := map[string]any{"status": resp.StatusCode, "headers": headers, "body": string(b), "truncated": truncated}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		var j any
		if json.Unmarshal(b, &j) == nil {
			out["json"] = j
		}
	}
	if want := integer(in, "expect_status", 0); want != 0 && int64(resp.StatusCode) != want {
		return out, caperr.New(caperr.ToolFailure, "%s %s returned %d, expected %d", method, str(in, "url"), resp.StatusCode, want)
	}
	if in["expect_status"] == nil && resp.StatusCode >= 400 {
		code := caperr.ToolFailure
		if resp.StatusCode >= 500 {
			code = caperr.DependencyUnavailable
		}
		return out, caperr.New(code, "%s %s returned %d", method, str(in, "url"), resp.StatusCode)
	}
	return out, nil
}

// httpErr names why a request failed: the step's own end (its timeout or
// cancellation), the request's timeout_ms (TASK_TIMEOUT, as the docs
// say), or the endpoint (DEPENDENCY_UNAVAILABLE).
func httpErr(outer, ctx context.Context, err error, what string, timeout time.Duration) error {
	if ref, ok := egress.AsRefused(err); ok {
		return caperr.New(caperr.PolicyBlocked, "%s: %v", what, ref)
	}
	switch {
	case outer.Err() != nil:
		return ctxErr(outer, what)
	case ctx.Err() != nil:
		return caperr.New(caperr.TaskTimeout, "%s: no answer within timeout_ms (%s)", what, timeout)
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "%s", what)
}

// setHeaders sets the step's headers on req.
func setHeaders(req *http.Request, in map[string]any) error {
	h, _ := in["headers"].(map[string]any)
	for k, v := range h {
		val := fmt.Sprint(v)
		// A CR or LF would split the header (request smuggling): the
		// input is wrong, whatever the transport would say.
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(val) {
			return caperr.New(caperr.InvalidInput, "headers.%s: not a valid HTTP header (a name of token characters; a value without CR, LF or NUL)", k)
		}
		if strings.EqualFold(k, wire.PlanStepHeader) {
			return caperr.New(caperr.InvalidInput, "headers.%s: capflow sets this header itself", k)
		}
		req.Header.Set(k, val)
	}
	return nil
}

// Outbound is the egress proxy a confined tree with the network (a
// command tool's, a server's, a browser's) reaches it through: rules'
// connections only, each request marked as step's, each refusal told.
func Outbound(rules *egress.Rules, step string, refused func(error)) *egress.Proxy {
	return &egress.Proxy{Rules: rules, Mark: http.Header{wire.PlanStepHeader: {step}}, OnRefused: refused}
}

// Relay connects a confined tree's loopback port to the same port of this
// machine's, as rules allow (sandbox.Request.Relay).
func Relay(rules *egress.Rules) func(port uint16) (net.Conn, error) {
	return func(port uint16) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// By the name "localhost": an allow entry may name it so.
		return rules.Dial(ctx, "tcp", net.JoinHostPort("localhost", strconv.Itoa(int(port))))
	}
}
