package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/wire"
)

const maxHTTPEnvelope = 8 << 20

func (r *Runner) runHTTP(ctx context.Context, req Request, b *envelope.Builder, red *envelope.Redactor) envelope.Envelope {
	m := req.Manifest
	body, _ := json.Marshal(req.Inputs)
	hreq, err := http.NewRequestWithContext(ctx, m.Entrypoint.Method, m.Entrypoint.URL, bytes.NewReader(body))
	if err != nil {
		return b.Fail(caperr.InvalidInput, err.Error(), nil)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("X-Capflow-Run-Id", req.RunID)
	hreq.Header.Set("X-Capflow-Step-Id", req.StepID)
	for k, v := range m.Entrypoint.Headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set(wire.PlanStepHeader, req.RunID+"/"+req.StepID)
	hc := req.Net.Plus(egress.HostPort(m.Entrypoint.URL)).Client()
	defer hc.CloseIdleConnections() // a transport of this call's own
	resp, err := hc.Do(hreq)
	if err != nil {
		if ref, ok := egress.AsRefused(err); ok {
			return b.Fail(caperr.PolicyBlocked, fmt.Sprintf("%s: %v", m.Name, ref), nil)
		}
		if ctx.Err() != nil {
			return b.Fail(ctxCode(ctx), fmt.Sprintf("%s: %s", m.Name, ctxMessage(ctxCode(ctx))), nil)
		}
		return b.Fail(caperr.DependencyUnavailable, fmt.Sprintf("%s: %v", m.Name, err), nil)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPEnvelope+1))
	if err != nil || len(raw) > maxHTTPEnvelope {
		return b.Fail(caperr.ToolFailure, fmt.Sprintf("%s: response unreadable or over %d bytes", m.Name, maxHTTPEnvelope), nil)
	}
	env, perr := decodeEnvelope(raw)
	if perr != nil {
		b.Error("result", fmt.Sprintf("HTTP %d without a valid envelope", resp.StatusCode), red.CutFront(lastBytes(raw, 2048)))
		code := caperr.ToolFailure
		if resp.StatusCode >= 500 {
			code = caperr.DependencyUnavailable
		}
		return b.Fail(code, fmt.Sprintf("%s answered HTTP %d without a valid envelope: %v", m.Name, resp.StatusCode, perr), nil)
	}
	if !env.Success {
		knownCode(env)
	}
	return *env
}
