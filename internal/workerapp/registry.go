package workerapp

import (
	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/registry"
)

func registryLoad(a *activities.Activities) (*registry.Registry, error) {
	return registry.Load(a.RegistryOptions)
}

// NewRouter returns the request router for the Route activity (nil until
// routing rules exist).
func NewRouter(cfg *config.Config, log hclog.Logger) activities.Router { return nil }
