// Package logging builds the hclog root logger shared by the CLI and the
// worker; subsystems take Named children of it.
package logging

import (
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// New returns a logger writing to w at the level in CAPFLOW_LOG_LEVEL
// (trace, debug, info, warn, error; default def) and in JSON when
// CAPFLOW_LOG_FORMAT=json.
func New(name string, w io.Writer, def hclog.Level) hclog.Logger {
	level := def
	if s := os.Getenv("CAPFLOW_LOG_LEVEL"); s != "" {
		if l := hclog.LevelFromString(s); l != hclog.NoLevel {
			level = l
		}
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     w,
		JSONFormat: strings.EqualFold(os.Getenv("CAPFLOW_LOG_FORMAT"), "json"),
		// Color only for terminals, never in files or CI logs.
		Color: hclog.AutoColor,
	})
}
