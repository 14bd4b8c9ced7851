// Package kits embeds the kits that ship inside the capflow binaries
// (core and runtime). Kits on disk (like media) are found through kits_dirs.
package kits

import (
	"embed"
	"io/fs"
)

//go:embed core runtime
var builtin embed.FS

// Builtin returns the embedded kits: <id>/kit.yaml and <id>/<tool>/tool.yaml.
func Builtin() fs.FS { return builtin }

// DefaultRouterRules are the shipped routing rules (kits/router.yaml), used
// when a project has no router.yaml of its own.
//
//go:embed router.yaml
var DefaultRouterRules []byte
