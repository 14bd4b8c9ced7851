package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

// The result cache (docs/cache.md): list, show and purge its entries in the
// project's artifact store.

func (a *App) cacheCommand() *cobra.Command {
	c := &cobra.Command{Use: "cache", Short: "List, show and purge the result cache", RunE: a.groupRun}
	c.AddCommand(a.cacheList(), a.cacheShow(), a.cachePurge())
	return c
}

// CacheEntry is one entry in command output.
type CacheEntry struct {
	Key       string `json:"key"`
	Tool      string `json:"tool"`
	Step      string `json:"step"`
	Run       string `json:"run"`
	Created   string `json:"created"`
	AgeS      int64  `json:"age_seconds"`
	DataBytes int64  `json:"data_bytes"`
	Files     int    `json:"files"`
}

func cacheEntry(e cache.Entry, now time.Time) CacheEntry {
	return CacheEntry{Key: e.Key, Tool: e.Tool, Step: e.Step, Run: e.Run, Created: e.Created.UTC().Format(time.RFC3339),
		AgeS: int64(e.Age(now) / time.Second), DataBytes: e.DataBytes, Files: len(e.Artifacts)}
}

// openCache opens the project's store.
func (a *App) openCache(ctx context.Context) (cache.Cache, func(), error) {
	p, err := a.loadProject()
	if err != nil {
		return cache.Cache{}, nil, err
	}
	s, err := p.Artifacts(ctx)
	if err != nil {
		return cache.Cache{}, nil, err
	}
	return cache.Cache{Store: s}, func() { _ = s.Close() }, nil
}

func (a *App) cacheList() *cobra.Command {
	return &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List the cached results, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := a.openCache(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			all, err := c.List(cmd.Context())
			if err != nil {
				return err
			}
			a.setEntries("capflow-cache-ls", "list", "entries", "%s in %s", c, all, time.Now())
			return nil
		},
	}
}

// setEntries makes a command's result of entries: data {store, <field>},
// the message from format (their count, the store), feedback for the
// store and for what phase did (their count and size), a table for people.
func (a *App) setEntries(id, phase, field, format string, c cache.Cache, entries []cache.Entry, now time.Time) {
	out := []CacheEntry{}
	var bytes int64
	for _, e := range entries {
		out = append(out, cacheEntry(e, now))
		bytes += e.DataBytes
	}
	b := envelope.NewBuilder(id)
	b.Info("store", "artifact store "+c.Store.Where)
	b.Info(phase, fmt.Sprintf("%s, %d bytes of data", results(len(out)), bytes))
	env := b.Succeed(fmt.Sprintf(format, results(len(out)), c.Store.Where), map[string]any{"store": c.Store.Where, field: out})
	a.set(env, func(w io.Writer) { cacheTable(w, out, env.Message) })
}

func cacheTable(w io.Writer, entries []CacheEntry, message string) {
	var rows [][]string
	for _, e := range entries {
		rows = append(rows, []string{e.Key[:12], e.Tool, e.Step, e.Run, (time.Duration(e.AgeS) * time.Second).String(), strconv.FormatInt(e.DataBytes, 10), strconv.Itoa(e.Files)})
	}
	if len(rows) > 0 {
		table(w, []string{"KEY", "TOOL", "STEP", "RUN", "AGE", "DATA BYTES", "FILES"}, rows)
	}
	fmt.Fprintln(w, message)
}

func (a *App) cacheShow() *cobra.Command {
	return &cobra.Command{
		Use: "show KEY", Short: "Show one cached result (its key, or a prefix of at least 6 hex digits)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := a.openCache(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			e, err := c.Find(cmd.Context(), strings.ToLower(args[0]))
			if err != nil {
				return err
			}
			b := envelope.NewBuilder("capflow-cache-show")
			b.Info("store", "artifact store "+c.Store.Where)
			b.Info("show", fmt.Sprintf("entry %s: %d bytes of data, %d files", e.Key[:12], e.DataBytes, len(e.Artifacts)))
			env := b.Succeed(fmt.Sprintf("%s: %s of step %s in %s", e.Key[:12], e.Tool, e.Step, e.Run), e)
			a.set(env, func(w io.Writer) {
				fmt.Fprintf(w, "key      %s\ntool     %s (manifest %s)\nstep     %s of run %s\ncreated  %s\ndata     sha256:%s (%d bytes)\n",
					e.Key, e.Tool, short12(e.Digest), e.Step, e.Run, e.Created.UTC().Format(time.RFC3339), e.Data, e.DataBytes)
				for _, f := range e.Artifacts {
					fmt.Fprintf(w, "file     %s %s sha256:%s (%d bytes)\n", f.Pointer, f.Path, f.SHA256, f.Bytes)
				}
			})
			return nil
		},
	}
}

func results(n int) string {
	if n == 1 {
		return "1 cached result"
	}
	return fmt.Sprintf("%d cached results", n)
}

func short12(s string) string { return s[:min(12, len(s))] }

func (a *App) cachePurge() *cobra.Command {
	var olderThan string
	c := &cobra.Command{
		Use: "purge", Short: "Delete cached results (all, or those older than --older-than)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := parseAge(olderThan)
			if err != nil {
				return caperr.New(caperr.InvalidInput, "%q is %v", olderThan, err).At("", 0, 0, "--older-than")
			}
			c, done, err := a.openCache(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			now := time.Now()
			gone, err := c.Purge(cmd.Context(), age, now)
			if err != nil {
				return err
			}
			a.setEntries("capflow-cache-purge", "purge", "purged", "purged %s from %s", c, gone, now)
			return nil
		},
	}
	c.Flags().StringVar(&olderThan, "older-than", "", "only results older than this (a duration: 36h, 90m, or days: 7d)")
	return c
}

// parseAge reads a Go duration or a number of days ("7d"); "" is 0.
// maxAgeDays is the largest age in days a time.Duration holds (~292 years).
const maxAgeDays = 106751

func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		// NaN fails every comparison: !(n > 0) refuses it; past ~290
		// years a Duration overflows to a negative age (purging all).
		if err != nil || !(n > 0) || n > maxAgeDays {
			return 0, fmt.Errorf("not a number of days between 0 and %d", maxAgeDays)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("not a positive duration like 36h or 7d")
	}
	return d, nil
}
