// Command capflow is the capflow CLI. Wiring only: commands live in internal/cli.
package main

import (
	"os"

	"github.com/capflow/capflow/internal/cli"
)

func main() {
	os.Exit(cli.Process(os.Args[1:], os.Stdout, os.Stderr))
}
