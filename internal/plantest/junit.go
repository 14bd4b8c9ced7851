package plantest

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
)

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// JUnit is the report as JUnit XML: one test suite (the plan), one test
// case per case.
func (r *Report) JUnit() ([]byte, error) {
	s := junitSuite{Name: r.Plan, Tests: len(r.Cases), Failures: r.Failed, Time: seconds(r.DurationMS)}
	for _, c := range r.Cases {
		jc := junitCase{Name: c.Name, ClassName: "plan." + r.Plan, Time: seconds(c.DurationMS)}
		if !c.Passed {
			jc.Failure = &junitFailure{Message: fmt.Sprintf("%d expectation(s) did not hold", len(c.Diffs)), Text: c.describe()}
		}
		s.Cases = append(s.Cases, jc)
	}
	b, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// DefaultCases is the case file of a plan when none is named:
// tests/<plan file name> beside the plan, when it exists ("" otherwise).
func DefaultCases(planFile string) string {
	p := filepath.Join(filepath.Dir(planFile), "tests", filepath.Base(planFile))
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p
	}
	return ""
}
