package preflight

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/registry"
)

// setup writes 1,000 tools (100 capabilities, 10 providers each) and a
// 10,000-step plan: chains of 10 steps, each step feeding the previous
// step's typed output into its input, so data flow is checked everywhere.
func setup(b *testing.B) (*plan.Plan, *registry.Registry) {
	b.Helper()
	root := b.TempDir()
	for i := 0; i < 1000; i++ {
		d := filepath.Join(root, "tools", fmt.Sprintf("tool-%04d", i))
		os.MkdirAll(d, 0o755)
		src := fmt.Sprintf(`name: tool-%04d
version: 1.%d.0
description: generated
capabilities: [dom%d.act]
input_schema: {type: object, required: [text], properties: {text: {type: string}, n: {type: integer}}}
output_schema: {type: object, required: [text, count], properties: {text: {type: string}, count: {type: integer}}}
entrypoint: {type: builtin, name: x}
priority: %d
`, i, i%10, i%100, i%7)
		os.WriteFile(filepath.Join(d, "tool.yaml"), []byte(src), 0o644)
	}
	reg, err := registry.Load(registry.Options{Root: root, ToolsDirs: []string{"tools"}})
	if err != nil || len(reg.Tools) != 1000 {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("name: big\ninputs: {seed: {type: string, default: x}}\nmax_parallel: 16\nsteps:\n")
	for i := 0; i < 10000; i++ {
		c := i % 100
		if i%10 == 0 {
			fmt.Fprintf(&sb, "  - {id: s%05d, capability: dom%d.act, with: {text: \"${inputs.seed}\"}}\n", i, c)
		} else {
			fmt.Fprintf(&sb, "  - {id: s%05d, capability: dom%d.act, with: {text: \"${steps.s%05d.data.text}\", n: \"${steps.s%05d.data.count}\"}}\n", i, c, i-1, i-1)
		}
	}
	p, probs := plan.Parse("big.yaml", []byte(sb.String()))
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	return p, reg
}

// BenchmarkCheck10000Steps1000Tools: resolution, data flow, gaps and
// policy for a 10,000-step plan against 1,000 tools.
func BenchmarkCheck10000Steps1000Tools(b *testing.B) {
	p, reg := setup(b)
	pol := policy.Default()
	pol.Limits[policy.MaxSteps] = 20000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := Check(Request{Plan: p, Registry: reg, Policy: pol, MinConfidence: 0.7})
		if r.Status != Ready || len(r.Resolution) != 10000 {
			b.Fatalf("%s %s", r.Status, r.Message)
		}
	}
}

// BenchmarkParse10000Steps measures parsing and validating the plan file.
func BenchmarkParse10000Steps(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("name: big\nsteps:\n")
	for i := 0; i < 10000; i++ {
		if i == 0 {
			fmt.Fprintf(&sb, "  - {id: s%05d, capability: a.b}\n", i)
		} else {
			fmt.Fprintf(&sb, "  - {id: s%05d, capability: a.b, with: {x: \"${steps.s%05d.data.x}\"}}\n", i, i-1)
		}
	}
	src := []byte(sb.String())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, probs := plan.Parse("big.yaml", src); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
}
