package workerapp

import (
	"context"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/cli"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/router"
)

func registryLoad(a *activities.Activities) (*registry.Registry, error) {
	return registry.Load(a.RegistryOptions)
}

// projectRouter routes requests for the Route activity. It is built per
// request from the worker's project, so edits to router.yaml, the tools or
// the policy apply without a restart.
type projectRouter struct {
	cfg  *config.Config
	log  hclog.Logger
	logw io.Writer
}

// NewRouter returns the request router of the worker's project.
func NewRouter(cfg *config.Config, log hclog.Logger, logw io.Writer) activities.Router {
	return &projectRouter{cfg: cfg, log: log.Named("router"), logw: logw}
}

func (p *projectRouter) Route(ctx context.Context, request string, _ map[string]any) (any, string, string, string, error) {
	reg, err := registry.Load(cli.RegistryOptions(p.cfg, p.log))
	if err != nil {
		return nil, "", "", "", err
	}
	pol, err := cli.LoadPolicy(p.cfg)
	if err != nil {
		return nil, "", "", "", err
	}
	r, err := router.FromConfig(p.cfg, router.CatalogOf(reg), pol.Limits[policy.MaxLLMCalls], p.log, p.logw)
	if err != nil {
		return nil, "", "", "", err
	}
	res, err := r.Route(ctx, request)
	if err != nil {
		return nil, "", "", "", err
	}
	if res.Plan == nil {
		return nil, "", "", res.Message, nil
	}
	return res.PlanValue, res.Kind, res.ID, res.Message, nil
}
