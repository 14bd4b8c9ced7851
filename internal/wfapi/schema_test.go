package wfapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/capflow/capflow/internal/schema"
)

// The workflow's JSON Schemas (schemas/workflow-input.schema.json and
// workflow-result.schema.json) are generated from the types here: this
// test fails when they drift. CAPFLOW_UPDATE_SCHEMAS=1 rewrites them.
func TestWorkflowSchemasMatchTheTypes(t *testing.T) {
	for _, c := range []struct {
		file, title string
		v           any
	}{
		{"workflow-input.schema.json", "capflow PlanWorkflow input", &Input{}},
		{"workflow-result.schema.json", "capflow PlanWorkflow result", &Result{}},
	} {
		r := &jsonschema.Reflector{DoNotReference: false, AllowAdditionalProperties: false}
		s := r.Reflect(c.v)
		s.ID = jsonschema.ID("https://capflow.dev/schemas/" + c.file)
		s.Title = c.title
		got, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("..", "..", "schemas", c.file)
		if os.Getenv("CAPFLOW_UPDATE_SCHEMAS") == "1" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil || string(want) != string(got) {
			t.Fatalf("%s is not what the Go types give (run CAPFLOW_UPDATE_SCHEMAS=1 go test ./internal/wfapi): %v", c.file, err)
		}
		var doc any
		_ = json.Unmarshal(got, &doc)
		if _, vs := schema.Compile(doc); len(vs) > 0 {
			t.Fatalf("%s does not compile: %v", c.file, vs)
		}
	}
}
