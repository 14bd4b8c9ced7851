package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// Route turns request text into a plan inside the workflow, so a service
// with only a Temporal client can ask in words. The plan chosen is
// recorded in history (this activity's result) and in the report.
func (a *Activities) Route(ctx context.Context, in wfapi.RouteInput) (*wfapi.RouteResult, error) {
	if a.Router == nil {
		return nil, temporal.NewApplicationErrorWithOptions("request routing is not configured on this worker", string(caperr.ConfigError), temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	p, kind, id, msg, err := a.Router.Route(ctx, in.Request, in.Inputs)
	if err != nil {
		code := caperr.CodeOf(err)
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), string(code), temporal.ApplicationErrorOptions{NonRetryable: !caperr.Lookup(code).Retryable})
	}
	if p == nil {
		return &wfapi.RouteResult{Message: msg}, nil
	}
	return &wfapi.RouteResult{Plan: p, Route: &wfapi.RouteInfo{Kind: kind, ID: id}, Message: msg}, nil
}
