package config

import (
	"encoding/json"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/yamldoc"
)

// limitsProblems are the positioned problems of capflow.yaml's limits the
// schema cannot see (manifest.Limits.Problems).
func limitsProblems(doc *yamldoc.Doc, raw map[string]any, display string) caperr.Problems {
	var probs caperr.Problems
	lims, _ := raw["limits"].(map[string]any)
	for capability, l := range lims {
		m, _ := l.(map[string]any)
		for _, pr := range manifest.LimitsOf(m).Problems() {
			path := []string{"limits", capability}
			if pr[0] != "" {
				path = append(path, pr[0])
			}
			p := doc.Root.PosOf(path)
			probs = append(probs, caperr.New(caperr.ConfigError, "%s", pr[1]).At(display, p.Line, p.Column, yamldoc.FieldPath(path)))
		}
	}
	return probs
}

// inlineKeys are the places of capflow.yaml where a key written inline
// (api_key) is refused with what to write instead.
func inlineKeys(doc *yamldoc.Doc, raw map[string]any, display string) (caperr.Problems, map[string]bool) {
	var paths [][]string
	providers, _ := raw["llm"].(map[string]any)
	for name, p := range providers {
		if m, _ := p.(map[string]any); m != nil && m["api_key"] != nil {
			paths = append(paths, []string{"llm", name, "api_key"})
		}
	}
	if r, _ := raw["router"].(map[string]any); r != nil {
		if l, _ := r["llm"].(map[string]any); l != nil && l["api_key"] != nil {
			paths = append(paths, []string{"router", "llm", "api_key"})
		}
	}
	var probs caperr.Problems
	seen := map[string]bool{}
	for _, path := range paths {
		p := doc.Root.PosOf(path)
		field := yamldoc.FieldPath(path)
		seen[field] = true
		probs = append(probs, caperr.New(caperr.ConfigError, "a key is never written in capflow.yaml: put it in an environment variable and name that variable in api_key_env").At(display, p.Line, p.Column, field))
	}
	return probs, seen
}

// decodeFileOnly takes mcp_servers, limits and llm from the file's own map
// (validated by the schema already): viper would lowercase their keys.
func decodeFileOnly(raw map[string]any, cfg *Config) error {
	for key, into := range map[string]any{"mcp_servers": &cfg.MCPServers, "limits": &cfg.Limits, "llm": &cfg.LLM} {
		m, ok := raw[key]
		if !ok {
			continue
		}
		b, err := json.Marshal(m)
		if err == nil {
			err = json.Unmarshal(b, into)
		}
		if err != nil {
			return caperr.Wrap(caperr.ConfigError, err, "%s", key)
		}
	}
	return nil
}
