// Command capflow-worker runs capflow's workflow and activities. Wiring
// only: see internal/workerapp.
package main

import (
	"os"

	"github.com/capflow/capflow/internal/workerapp"
)

func main() { os.Exit(workerapp.Main(os.Args[1:], os.Stderr)) }
