// Package schemas embeds capflow's JSON Schemas so the binaries validate
// with exactly the files that editors use.
package schemas

import "embed"

// FS holds every *.schema.json of this folder.
//
//go:embed *.schema.json
var FS embed.FS

// Must returns one schema file's bytes; a missing one is a build defect.
func Must(name string) []byte {
	b, err := FS.ReadFile(name)
	if err != nil {
		panic("schemas: " + err.Error())
	}
	return b
}
