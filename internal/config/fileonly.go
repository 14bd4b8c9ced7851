package config

import (
	"encoding/json"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/yamldoc"
)

// limitsProblems are the positioned problems of capflow.yaml's limits the
// schema cannot see: a rate of zero.
func limitsProblems(doc *yamldoc.Doc, raw map[string]any, display string) caperr.Problems {
	var probs caperr.Problems
	lims, _ := raw["limits"].(map[string]any)
	for capability, l := range lims {
		r, _ := l.(map[string]any)["rate"].(string)
		if strings.Contains(r, "/") && (manifest.Limits{Rate: r}).Interval() == 0 {
			path := []string{"limits", capability, "rate"}
			p := doc.Root.PosOf(path)
			probs = append(probs, caperr.New(caperr.ConfigError, "rate %q lets nothing start (a rate above zero, like 1/m)", r).At(display, p.Line, p.Column, yamldoc.FieldPath(path)))
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
