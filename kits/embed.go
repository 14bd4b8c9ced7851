// Package kits embeds the kits that ship inside the capflow binaries:
// core, runtime and media (whose scripts are put on disk when used,
// internal/kitcache). A kit of the same id in kits_dirs comes first.
package kits

import (
	"embed"
	"io/fs"
)

//go:embed core runtime media
var builtin embed.FS

// Builtin returns the embedded kits: <id>/kit.yaml and <id>/<tool>/tool.yaml.
func Builtin() fs.FS { return builtin }

// DefaultRouterRules are the shipped routing rules (kits/router.yaml), used
// when a project has no router.yaml of its own.
//
//go:embed router.yaml
var DefaultRouterRules []byte
