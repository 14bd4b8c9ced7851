package soak

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is soak.json: the contract's fields first, then the detail.
type Report struct {
	Runs            int      `json:"runs"`
	AsExpected      int      `json:"as_expected"`
	Lost            int      `json:"lost"`
	Repeated        int      `json:"repeated_non_idempotent"`
	Orphans         int      `json:"orphans"`
	WorkerPeakRSSMB float64  `json:"worker_peak_rss_mb"`
	Faults          int      `json:"faults"`
	FaultKinds      []string `json:"fault_kinds"`
	RunsPerMin      float64  `json:"runs_per_min"`
	ElapsedS        float64  `json:"elapsed_s"`

	// Passed: every run as expected, nothing lost or repeated, no orphan,
	// no worker past its bound, every fault caused and landed (Faults
	// counts those: tools ran on the host it hit, or runs were under way).
	Passed bool `json:"passed"`
	// NotStarted: runs the CLI could not start (or the soak never got to).
	NotStarted int `json:"not_started"`
	// IdleFaults hit nothing; FailedFaults could not be caused.
	IdleFaults int `json:"idle_faults"`
	// Interrupted counts the runs that failed, as their plan allows, at a
	// non-idempotent step a fault cut short (it started once).
	Interrupted int     `json:"interrupted_non_idempotent"`
	MaxRSSMB    float64 `json:"max_rss_mb"`
	// NetworkNamespaces: each host had a network namespace of its own
	// (NetnsWhy says why not).
	NetworkNamespaces bool         `json:"network_namespaces"`
	NetnsWhy          string       `json:"network_namespaces_why_not,omitempty"`
	Hosts             []HostReport `json:"hosts"`
	FaultList         []Fault      `json:"fault_list"`
	OrphanList        []Orphan     `json:"orphan_list,omitempty"`
	RunList           []RunReport  `json:"run_list"`
	FailedFaults      int          `json:"failed_faults"`
}

// HostReport is one worker's figures.
type HostReport struct {
	Name      string  `json:"name"`
	Starts    int     `json:"starts"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// RunReport is one run and how it ended against its promise.
type RunReport struct {
	ID          string  `json:"id"`
	Plan        string  `json:"plan"`
	Status      string  `json:"status"`
	TookS       float64 `json:"took_s"`
	AsExpected  bool    `json:"as_expected"`
	Interrupted string  `json:"interrupted,omitempty"`
	Why         string  `json:"why,omitempty"`
	LostHosts   int     `json:"lost_hosts,omitempty"`
	// Retried counts its steps that took more than one attempt.
	Retried int `json:"retried_steps,omitempty"`
}

// report judges every run and gathers the figures.
func (s *soak) report() *Report {
	st := newStarts()
	for i, h := range s.hosts {
		if err := st.read(filepath.Join(h.dir, "logs", "counter.log"), i); err != nil {
			s.log.Error("counter log", "host", h.name, "error", err)
		}
	}
	rep := &Report{Runs: s.cfg.Runs, Repeated: st.Repeated(), FaultList: s.schedule, MaxRSSMB: s.cfg.MaxRSSMB,
		NetworkNamespaces: s.netns, NetnsWhy: s.netnsWhy}
	// What outlived its run: looked at once the last run ended, after the
	// time a stopping tree is given.
	time.Sleep(5 * time.Second)
	rep.OrphanList = s.reaper.orphans(s.prefix, s.cfg.Work)
	rep.Orphans = len(rep.OrphanList)
	s.mu.Lock()
	runs := slices.Clone(s.runs)
	s.mu.Unlock()
	for _, r := range runs {
		rep.RunList = append(rep.RunList, s.runReport(r, st))
		rr := rep.RunList[len(rep.RunList)-1]
		switch {
		case r.startedAt.IsZero():
			rep.NotStarted++
		case r.result == nil && r.endErr == "":
			rep.Lost++
		case rr.AsExpected:
			rep.AsExpected++
		}
		if rr.Interrupted != "" {
			rep.Interrupted++
		}
	}
	rep.NotStarted += s.cfg.Runs - len(runs) // the soak stopped early
	kinds := map[string]bool{}
	for _, f := range s.schedule {
		switch {
		case f.Error != "" || f.began.IsZero():
			rep.FailedFaults++
		case !f.landed():
			rep.IdleFaults++
		default:
			rep.Faults++
			kinds[string(f.Kind)] = true
		}
	}
	for k := range kinds {
		rep.FaultKinds = append(rep.FaultKinds, k)
	}
	sort.Strings(rep.FaultKinds)
	for _, h := range s.hosts {
		h.sample()
		hr := HostReport{Name: h.name, Starts: h.starts, PeakRSSMB: round(h.peakMB())}
		rep.Hosts = append(rep.Hosts, hr)
		rep.WorkerPeakRSSMB = max(rep.WorkerPeakRSSMB, hr.PeakRSSMB)
	}
	rep.ElapsedS = round(time.Since(s.began).Seconds())
	rep.RunsPerMin = round(float64(rep.AsExpected) / (rep.ElapsedS / 60))
	rep.Passed = rep.AsExpected == rep.Runs && rep.Lost == 0 && rep.Repeated == 0 && rep.Orphans == 0 &&
		rep.WorkerPeakRSSMB <= s.cfg.MaxRSSMB && rep.FailedFaults == 0 && rep.IdleFaults == 0
	return rep
}

func (s *soak) runReport(r *run, st Starts) RunReport {
	rr := RunReport{ID: r.id, Plan: r.plan.name, Status: "not started"}
	if r.startedAt.IsZero() {
		rr.Why = "never started: " + r.startErr
		return rr
	}
	end := time.Now()
	if r.endErr != "" {
		rr.Status, rr.Why, rr.TookS = "ended without a result", r.endErr, round(r.endedAt.Sub(r.startedAt).Seconds())
		return rr
	}
	if r.result != nil {
		rr.Status, rr.LostHosts = string(r.result.Status), len(r.result.LostHosts)
		for _, st := range r.result.Steps {
			rr.Retried += b2i(st.Attempts > 1)
		}
		end = r.endedAt
		rr.TookS = round(end.Sub(r.startedAt).Seconds())
	}
	v := judge(r.plan.promise, r.plan.counted, r.result, r.id, st, s.runHosts(r.id),
		func(host int) bool { return faultDuring(s.schedule, host, r.startedAt, end) })
	rr.AsExpected, rr.Interrupted, rr.Why = v.AsExpected, v.Interrupted, v.Why
	return rr
}

// runHosts are the hosts holding a folder of the run (where it ran).
func (s *soak) runHosts(id string) []int {
	var out []int
	for i, h := range s.hosts {
		if _, err := os.Stat(filepath.Join(h.dir, ".capflow", "runs", id)); err == nil {
			out = append(out, i)
		}
	}
	return out
}

func round(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// Print writes the report as tables: runs by plan, faults, the misses,
// and the verdict.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNS BY PLAN (moved host: the run lost its host and went on on another; retried: a step took more than one attempt)")
	fmt.Fprintln(tw, "PLAN\tRUNS\tAS EXPECTED\tINTERRUPTED\tMOVED HOST\tRETRIED\tMEDIAN S\tMAX S")
	byPlan := map[string][]RunReport{}
	for _, rr := range r.RunList {
		byPlan[rr.Plan] = append(byPlan[rr.Plan], rr)
	}
	for _, name := range slices.Sorted(maps.Keys(byPlan)) {
		rs := byPlan[name]
		ok, intr, moved, retried := 0, 0, 0, 0
		var took []float64
		for _, rr := range rs {
			ok += b2i(rr.AsExpected)
			intr += b2i(rr.Interrupted != "")
			moved += b2i(rr.LostHosts > 0)
			retried += b2i(rr.Retried > 0)
			took = append(took, rr.TookS)
		}
		sort.Float64s(took)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\n", name, len(rs), ok, intr, moved, retried, took[len(took)/2], took[len(took)-1])
	}
	fmt.Fprintln(tw, "\nFAULT\tHOST\tTOOLS THERE\tRUNS IN FLIGHT\tAT S\tTOOK S\tERROR")
	for _, f := range r.FaultList {
		host := "-"
		if f.Kind == WorkerKill || f.Kind == HostLost {
			host = fmt.Sprintf("host-%d", f.Host+1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%s\n", f.Kind, host, f.Tools, f.InFlight, f.AtS, f.TookS, f.Error)
	}
	fmt.Fprintln(tw, "\nHOST\tSTARTS\tPEAK RSS MB")
	for _, h := range r.Hosts {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\n", h.Name, h.Starts, h.PeakRSSMB)
	}
	_ = tw.Flush()
	for _, rr := range r.RunList {
		if !rr.AsExpected {
			fmt.Fprintf(w, "✗ %s (%s): %s\n", rr.ID, rr.Status, rr.Why)
		}
	}
	for _, o := range r.OrphanList {
		fmt.Fprintf(w, "✗ orphan pid %d (%s): %s\n", o.Pid, o.Command, o.Why)
	}
	mark := "✓"
	if !r.Passed {
		mark = "✗"
	}
	fmt.Fprintf(w, "%s %d/%d runs as expected (%d failed at an interrupted non-idempotent step, as allowed), %d lost, %d not started, %d repeated, %d orphans; %d faults landed (%s), %d hit nothing, %d failed; worker peak %.1f MB (bound %.0f); %.1f runs/min over %.0f s\n",
		mark, r.AsExpected, r.Runs, r.Interrupted, r.Lost, r.NotStarted, r.Repeated, r.Orphans, r.Faults, strings.Join(r.FaultKinds, ", "), r.IdleFaults, r.FailedFaults, r.WorkerPeakRSSMB, r.MaxRSSMB, r.RunsPerMin, r.ElapsedS)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
