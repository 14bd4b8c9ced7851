package manifest

import (
	"encoding/json"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// Kit is a validated kit.yaml.
type Kit struct {
	ID          string `json:"id"`
	Version     string `json:"version"`
	Description string `json:"description"`
	File        string `json:"file"`
	Builtin     bool   `json:"builtin"`
}

// ParseKit validates one kit.yaml.
func ParseKit(file string, data []byte) (*Kit, caperr.Problems) {
	doc, err := yamldoc.Parse(file, data)
	if err != nil {
		return nil, caperr.Problems{err.(*caperr.Error)}
	}
	if doc.Root.Kind != yamldoc.Map {
		return nil, caperr.Problems{caperr.New(caperr.InvalidInput, "kit.yaml must be a YAML mapping").At(file, doc.Root.Pos.Line, 0, "")}
	}
	raw := doc.Root.Interface()
	sch := schema.Embedded("kit.schema.json", schemas.Must("kit.schema.json"))
	probs := problemsFromViolations(doc, nil, sch.Validate(raw), "")
	if v, ok := raw.(map[string]any)["version"].(string); ok && !ValidVersion(v) {
		p := doc.Root.KeyPos("version")
		probs = append(probs, caperr.New(caperr.InvalidInput, "version %q is not semver", v).At(file, p.Line, p.Column, "version"))
	}
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	b, _ := json.Marshal(raw)
	var k Kit
	_ = json.Unmarshal(b, &k)
	k.File = file
	return &k, nil
}
