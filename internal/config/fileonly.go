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

// decodeFileOnly takes mcp_servers and limits from the file's own map
// (validated by the schema already): viper would lowercase their keys.
func decodeFileOnly(raw map[string]any, cfg *Config) error {
	for key, into := range map[string]any{"mcp_servers": &cfg.MCPServers, "limits": &cfg.Limits} {
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
