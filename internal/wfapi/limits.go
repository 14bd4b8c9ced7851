package wfapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/manifest"
)

// A tool's limits (manifest `limits:`) and a capability's (capflow.yaml)
// are kept by one LimitWorkflow per limit and key value, for every run and
// worker (docs/manifests.md#limits). An attempt asks for a slot with the
// acquire update, which answers at once: the slot is the attempt's, or it
// is queued (first come, first served); a queued attempt asks the holds
// query until it holds the slot. Holders and waiters renew their lease
// while they run or wait and release at their end; a lease that runs out
// (its worker died) frees its slot or its place.
const (
	LimitWorkflowType  = "CapflowLimit"
	LimitAcquireUpdate = "acquire"
	// LimitHoldsQuery answers, for a holder, LimitHeld, LimitQueued or
	// LimitUnknown (its lease ran out: it asks again).
	LimitHoldsQuery = "holds"
	// LimitPlaceQuery answers, for a holder, 0 (it holds a slot), its
	// place in the queue (1: next), or -1 (unknown): a waiter far back
	// asks less often.
	LimitPlaceQuery = "place"
	// LimitReleaseSignal carries a holder: its slot comes back, or, still
	// waiting, it leaves the queue (a cancelled step takes nothing).
	LimitReleaseSignal = "release"
	// LimitRenewSignal carries a LimitRenew: its holder's or waiter's
	// lease starts again (a holder the limit let go, its lease run out
	// while its tool ran on, holds again).
	LimitRenewSignal = "renew"
)

// What the acquire update and the holds query answer.
const (
	LimitHeld    = "held"
	LimitQueued  = "queued"
	LimitUnknown = "unknown"
)

// LimitRequest is one attempt's request for a slot, with the limit as it
// is declared now (the latest request's settings are the limit's).
type LimitRequest struct {
	Holder      string        `json:"holder"`
	Concurrency int           `json:"concurrency,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"` // between two starts (the rate)
	Lease       time.Duration `json:"lease"`
}

// LimitRenew renews a holder's or a waiter's lease; Held says the
// attempt holds its slot (its tool runs).
type LimitRenew struct {
	Holder string        `json:"holder"`
	Lease  time.Duration `json:"lease"`
	Held   bool          `json:"held,omitempty"`
}

// LimitState is what a LimitWorkflow carries when it continues as new.
type LimitState struct {
	// Label names the limit for people (tool, key input): never the key's
	// value, which may be an account.
	Label       string               `json:"label"`
	Concurrency int                  `json:"concurrency,omitempty"`
	Interval    time.Duration        `json:"interval,omitempty"`
	Holders     map[string]time.Time `json:"holders,omitempty"` // holder -> lease end
	// Queue are the waiters in their order, each with its lease end.
	Queue []LimitWaiter `json:"queue,omitempty"`
	Next  time.Time     `json:"next,omitempty"` // the earliest next start
	// LetGo are holders whose lease ran out, and when: only they may hold
	// again by a renewal (their tool ran on through an outage).
	LetGo map[string]time.Time `json:"let_go,omitempty"`
}

// LimitWaiter is a queued attempt.
type LimitWaiter struct {
	Holder string        `json:"holder"`
	Until  time.Time     `json:"until"`
	Lease  time.Duration `json:"lease"`
}

// MinLimitLease is the shortest lease a slot is given: a short heartbeat
// timeout must not let two late renewals lose a running tool its slot.
// MaxLimitLease is the longest: a dead worker's slot comes back within it
// whatever its tool's heartbeat timeout says (renewals keep a live one's).
const (
	MinLimitLease = 10 * time.Second
	MaxLimitLease = 5 * time.Minute
)

// LimitLease is a lease as a limit keeps it: within MinLimitLease and
// MaxLimitLease.
func LimitLease(d time.Duration) time.Duration { return min(max(d, MinLimitLease), MaxLimitLease) }

// LimitIDPrefix starts every limit's workflow ID: no run takes one.
const LimitIDPrefix = "capflow-limit:"

// LimitWorkflowID is the workflow that keeps a limit ("tool NAME",
// "capability CAP") of the project whose workers serve queue, for one key
// value: two projects (two task queues) share no limit, and each limit
// runs on a queue all its project's workers serve. The value is a digest:
// IDs show in the Web UI, and a value may name an account (a digest is a
// pseudonym, not a secret: a guessed value can be checked against it).
func LimitWorkflowID(queue, scope, key string) string {
	id := LimitIDPrefix + queue + ":" + strings.ReplaceAll(scope, " ", ":")
	if key == "" {
		return id
	}
	sum := sha256.Sum256([]byte(key))
	return id + ":" + hex.EncodeToString(sum[:8])
}

// MaxLimitHolder bounds a holder's name.
const MaxLimitHolder = 512

// Check says what is wrong with a request no attempt of capflow's sends
// (nil: nothing): no holder, a limit with neither concurrency nor rate, a
// concurrency below one or past 10,000, a rate outside one start a day to
// a million a second, a lease outside MinLimitLease..MaxLimitLease (0 is
// the least).
func (r LimitRequest) Check() error {
	switch {
	case r.Holder == "" || len(r.Holder) > MaxLimitHolder:
		return fmt.Errorf("a holder of 1 to %d bytes", MaxLimitHolder)
	case r.Concurrency < 0 || r.Concurrency > manifest.MaxConcurrency:
		return fmt.Errorf("concurrency %d: 1 to %d (0: none, with a rate)", r.Concurrency, manifest.MaxConcurrency)
	case r.Interval != 0 && (r.Interval < manifest.MinInterval || r.Interval > manifest.MaxInterval):
		return fmt.Errorf("interval %s: %s to %s (0: no rate, with a concurrency)", r.Interval, manifest.MinInterval, manifest.MaxInterval)
	case r.Concurrency == 0 && r.Interval == 0:
		return fmt.Errorf("a limit needs a concurrency or a rate")
	case r.Lease != 0 && (r.Lease < MinLimitLease || r.Lease > MaxLimitLease):
		return fmt.Errorf("lease %s: %s to %s", r.Lease, MinLimitLease, MaxLimitLease)
	}
	return nil
}
