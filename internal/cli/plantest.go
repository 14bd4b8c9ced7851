package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plantest"
)

// planTest is `capflow plan test`: the plan's real workflow against test
// cases, in Temporal's test environment (docs/plan-tests.md).
func (a *App) planTest() *cobra.Command {
	var casesFile, junit string
	var coverage bool
	c := &cobra.Command{
		Use:   "test PLAN",
		Short: "Run a plan against test cases in Temporal's test environment: no tools, no server (--cases FILE, --coverage, --junit FILE)",
		Long: "Runs the plan's real workflow in the Temporal SDK's test environment, once per case: each step answers\n" +
			"with what the case gives (data, an error, a decision) or with a result generated from its tool's output\n" +
			"schema. Cases come from --cases, else from tests/<plan file> beside the plan; without either, one\n" +
			"generated happy-path case runs. Exits 1 when a case fails.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			const cid = "capflow-plan-test"
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			s, err := plantest.Prepare(cfg, args[0], a.log.Named("plantest"))
			if err != nil {
				return err
			}
			defer s.Close()
			if casesFile == "" {
				casesFile = plantest.DefaultCases(args[0])
			}
			cases := []*plantest.Case{s.HappyPath()}
			if casesFile != "" {
				if cases, err = s.LoadCases(casesFile); err != nil {
					return err
				}
			}
			rep := s.Run(cases)
			if !coverage {
				rep.Coverage = nil
			}
			if junit != "" {
				if err := writeJUnit(junit, rep); err != nil {
					return err
				}
			}
			a.set(testEnvelope(cid, rep), func(w io.Writer) { prettyTest(w, rep) })
			return nil
		},
	}
	c.Flags().StringVar(&casesFile, "cases", "", "the case file (default: tests/<plan file> beside the plan, when it exists)")
	c.Flags().BoolVar(&coverage, "coverage", false, "list every when branch, join outcome, step outcome and on_failure: ask answer, and the cases that took it")
	c.Flags().StringVar(&junit, "junit", "", "also write the results as JUnit XML to this file (for CI)")
	return c
}

// testEnvelope succeeds when every case passed, else fails TEST_FAILURE
// naming the failed cases; its data is the report.
func testEnvelope(cid string, rep *plantest.Report) envelope.Envelope {
	b := envelope.NewBuilder(cid)
	msg := fmt.Sprintf("%s: %d of %d cases passed", rep.Plan, rep.Passed, len(rep.Cases))
	if rep.Coverage != nil {
		msg += fmt.Sprintf("; %d of %d branches taken", rep.Coverage.Taken, rep.Coverage.Total)
	}
	for _, c := range rep.Cases {
		if c.Passed {
			b.Info("case", c.Name+": passed")
		}
	}
	if rep.Failed == 0 {
		return b.Succeed(msg, rep)
	}
	for _, c := range rep.Cases {
		if !c.Passed {
			b.Error("test", fmt.Sprintf("case %q failed: %v", c.Name, c.Diffs), string(caperr.TestFailure))
		}
	}
	return b.Fail(caperr.TestFailure, msg, rep)
}

func prettyTest(w io.Writer, rep *plantest.Report) {
	for _, c := range rep.Cases {
		mark := "✓"
		if !c.Passed {
			mark = "✗"
		}
		fmt.Fprintf(w, "%s %s (the run %s, %d ms)\n", mark, printable(c.Name), c.Status, c.DurationMS)
		for _, d := range c.Diffs {
			fmt.Fprintf(w, "    %s\n", printable(d))
		}
		for _, n := range c.Warnings {
			fmt.Fprintf(w, "    note: %s\n", printable(n))
		}
	}
	if rep.Coverage != nil {
		fmt.Fprintf(w, "\n%s", rep.Coverage)
	}
	fmt.Fprintf(w, "\n%s: %d passed, %d failed (%d ms)\n", rep.File, rep.Passed, rep.Failed, rep.DurationMS)
}

// writeJUnit writes the report as JUnit XML.
func writeJUnit(path string, rep *plantest.Report) error {
	b, err := rep.JUnit()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "writing %s", path)
	}
	return nil
}
