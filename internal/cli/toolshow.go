package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/sandbox"
)

// ToolDefinition is everything capflow knows of one tool (`tools show`).
type ToolDefinition struct {
	Manifest *manifest.Manifest `json:"manifest"`
	// UID names it even where two kits hold the same name@version
	// (origin/name@version); a plan's tool: and these commands take it.
	UID         string `json:"uid"`
	Description string `json:"description_md"`
	Source      string `json:"source"`
	Path        string `json:"path"`
	Digest      string `json:"digest"`
	// Runs is what a step of this tool would execute: the command line,
	// the builtin function or the HTTP endpoint.
	Runs string `json:"runs"`
	// Confinement is how a step of it runs: what it may touch and use
	// (docs/sandbox.md).
	Confinement string `json:"confinement"`
}

// brokenTool is the problems of a manifest the registry left out whose
// folder is named name (tools/NAME/tool.yaml): a new user was told such a
// tool did not exist (a new-user trial of issue 57).
func brokenTool(reg *registry.Registry, name string) caperr.Problems {
	var out caperr.Problems
	for _, p := range reg.Problems {
		if p.File != "" && filepath.Base(filepath.Dir(p.File)) == name {
			out = append(out, p)
		}
	}
	return out
}

func (a *App) toolsShow() *cobra.Command {
	return &cobra.Command{
		Use:   "show [ORIGIN/]TOOL[@VERSION]|CAPABILITY",
		Short: "A tool's whole definition: manifest, schemas, description.md, source and digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			m := findTool(reg, args[0])
			if probs := brokenTool(reg, args[0]); m == nil && len(probs) > 0 {
				return probs // its manifest is there, and broken: not a missing tool
			}
			if m == nil {
				return caperr.New(caperr.ToolNotFound, "no tool or capability named %q%s (see capflow tools list)", args[0], toolPhrase(reg, args[0]))
			}
			def := ToolDefinition{Manifest: m, UID: m.UID(), Description: reg.Description(m), Source: m.Source, Path: m.File, Digest: m.Digest, Runs: Runs(m),
				Confinement: sandbox.Confinement(m)}
			b := envelope.NewBuilder("capflow-tools-show")
			b.Info("lookup", fmt.Sprintf("%q is %s (%s)", args[0], m.UID(), reg.Summary()))
			env := b.Succeed(fmt.Sprintf("%s@%s (%s)", m.Name, m.Version, m.Source), def)
			a.set(env, func(w io.Writer) { prettyDefinition(w, def) })
			return nil
		},
	}
}
