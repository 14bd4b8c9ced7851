package workerapp

import (
	"context"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/wfapi"
)

// projectRouter routes requests for the Route activity. It is built per
// request from the worker's project, so edits to router.yaml, the tools or
// the policy apply without a restart.
type projectRouter struct{ p *project.Project }

// NewRouter returns the request router of the worker's project.
func NewRouter(p *project.Project) activities.Router { return &projectRouter{p: p} }

func (r *projectRouter) Route(ctx context.Context, request string, _ map[string]any) (*wfapi.RouteResult, error) {
	reg, err := r.p.Registry()
	if err != nil {
		return nil, err
	}
	pol, err := r.p.Policy()
	if err != nil {
		return nil, err
	}
	rt, err := r.p.Router(reg, pol)
	if err != nil {
		return nil, err
	}
	res, err := rt.Route(ctx, request)
	if err != nil {
		return nil, err
	}
	out := &wfapi.RouteResult{Message: res.Message, LLMCalls: res.LLMCalls}
	if res.Plan != nil {
		out.Plan, out.Route = res.PlanValue, &wfapi.RouteInfo{Kind: res.Kind, ID: res.ID}
	}
	return out, nil
}
