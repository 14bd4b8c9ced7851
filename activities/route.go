package activities

import (
	"context"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// Route turns request text into a plan inside the workflow, so a service
// with only a Temporal client can ask in words. The plan chosen is
// recorded in history (this activity's result) and in the report.
func (a *Activities) Route(ctx context.Context, in wfapi.RouteInput) (*wfapi.RouteResult, error) {
	if a.Router == nil {
		return nil, appError(caperr.New(caperr.ConfigError, "request routing is not configured on this worker"))
	}
	res, err := a.Router.Route(ctx, in.Request, in.Inputs)
	if err != nil {
		return nil, appError(err)
	}
	return res, nil
}
