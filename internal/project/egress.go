package project

import (
	"net"
	"net/url"
	"sync"

	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/policy"
)

// services are the worker's own services a run may not reach: those the
// configuration names, resolved once, and those the process serves
// (AddService).
type services struct {
	once  sync.Once
	mu    sync.Mutex
	list  []egress.Service
	extra []egress.Service
}

// AddService names a service this process serves (the console, metrics,
// `capflow mcp --http`) at hostport.
func (p *Project) AddService(name, hostport string) {
	if s, ok := egress.ServiceAt(name, hostport); ok {
		p.services.mu.Lock()
		p.services.extra = append(p.services.extra, s)
		p.services.mu.Unlock()
	}
}

// Services are the worker's own services: Temporal's frontend (every port
// of its host: its HTTP API, its internal frontend), the Web UI, the
// artifact store, the trace collector, and what the process serves.
func (p *Project) Services() []egress.Service {
	sv := &p.services
	sv.once.Do(func() {
		cfg := p.Config
		add := func(name, hostport string) {
			if s, ok := egress.ServiceAt(name, hostport); ok {
				sv.list = append(sv.list, s)
			}
		}
		if host, _, err := net.SplitHostPort(cfg.Temporal.Address); err == nil {
			add("Temporal's frontend", host)
		}
		add("Temporal's Web UI", egress.HostPort(cfg.Temporal.UIURL))
		if u, err := url.Parse(cfg.Artifacts.URL); err == nil && u.Scheme == "s3" {
			add("the artifact store", egress.HostPort(u.Query().Get("endpoint")))
		}
		add("the trace collector", egress.HostPort(cfg.Telemetry.OTLPEndpoint))
		sv.list = append(sv.list, egress.ThisMachine())
	})
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append(append([]egress.Service(nil), sv.list...), sv.extra...)
}

// Egress are the network rules of a run under pol: its network.allow
// over the worker's own services.
func (p *Project) Egress(pol *policy.Policy) *egress.Rules {
	r := &egress.Rules{Services: p.Services()}
	if pol != nil {
		r.Allow = pol.Network
	}
	return r
}
