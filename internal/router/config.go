package router

import (
	"errors"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/kits"
)

// FromConfig builds the router of a project: its router.rules file, or
// the shipped rules when the project has none; the LLM fallback when
// router.llm names a base URL and a model. logw receives LLM_LOG output.
func FromConfig(cfg *config.Config, catalog func() []Capability, maxLLMCalls int, log hclog.Logger, logw io.Writer) (*Router, error) {
	r := &Router{Catalog: catalog, MaxLLMCalls: maxLLMCalls, Root: cfg.Root, Logger: log}
	path := cfg.Abs(cfg.Router.Rules)
	rules, err := LoadRules(path, cfg.Router.Rules)
	switch {
	case err == nil:
		r.Rules = rules
	case errors.Is(err, os.ErrNotExist):
		if r.Rules, err = ParseRules("builtin:router.yaml", kits.DefaultRouterRules, ""); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	l, err := cfg.RouterLLM()
	if err != nil {
		return nil, err
	}
	if (l.BaseURL != "" || l.Provider != "") && l.Model != "" {
		timeout, terr := l.TimeoutOf("router.llm")
		if terr != nil {
			return nil, terr
		}
		key := ""
		if l.APIKeyEnv != "" {
			key = os.Getenv(l.APIKeyEnv)
		}
		r.LLM = &LLM{API: l.API, BaseURL: l.BaseURL, Model: l.Model, APIKey: key, KeyEnv: l.APIKeyEnv, Timeout: timeout, Logger: log}
		if os.Getenv("LLM_LOG") == "1" {
			r.LLM.Log = logw
		}
	}
	return r, nil
}
