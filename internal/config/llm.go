package config

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// LLM is the router's optional fallback: a provider of the llm section
// (Provider), or one written here.
type LLM struct {
	Provider    string `mapstructure:"provider" json:"provider,omitempty"`
	LLMProvider `mapstructure:",squash"`
}

// LLMProvider is one model provider of the llm section.
type LLMProvider struct {
	API       string   `mapstructure:"api" json:"api,omitempty"`
	BaseURL   string   `mapstructure:"base_url" json:"base_url,omitempty"`
	Model     string   `mapstructure:"model" json:"model"`
	APIKeyEnv string   `mapstructure:"api_key_env" json:"api_key_env,omitempty"`
	Timeout   string   `mapstructure:"timeout" json:"timeout,omitempty"`
	Price     LLMPrice `mapstructure:"price" json:"price"`
}

// LLMPrice is a provider's price per million tokens, in US dollars.
type LLMPrice struct {
	InputPerMTok  float64 `mapstructure:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok float64 `mapstructure:"output_per_mtok" json:"output_per_mtok"`
}

// RouterLLM is the router's fallback as it runs: the provider it names,
// or its own settings.
func (c *Config) RouterLLM() (LLM, error) {
	l := c.Router.LLM
	if l.Provider == "" {
		return l, nil
	}
	p, ok := c.LLM[l.Provider]
	if !ok {
		names := slices.Sorted(maps.Keys(c.LLM))
		declared := "it declares none"
		if len(names) > 0 {
			declared = "it declares " + strings.Join(names, ", ")
		}
		return l, caperr.New(caperr.ConfigError, "%q is not a provider of the llm section (%s; names are matched as written)", l.Provider, declared).At(c.fileOrEnv(), 0, 0, "router.llm.provider")
	}
	return LLM{Provider: l.Provider, LLMProvider: p}, nil
}

// TimeoutOf is the provider's timeout (0 when it names none); where names
// the setting in the error of one that is not a duration.
func (p LLMProvider) TimeoutOf(where string) (time.Duration, error) {
	d, err := time.ParseDuration(p.Timeout)
	if err != nil && p.Timeout != "" {
		return 0, caperr.New(caperr.ConfigError, "%s.timeout %q is not a duration", where, p.Timeout)
	}
	return d, nil
}
