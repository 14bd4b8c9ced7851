package wfapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// A tool's limits (manifest `limits:`) are kept by one LimitWorkflow per
// tool and key value, for every run and worker (docs/manifests.md#limits):
// a step's attempt asks it for a slot (the acquire update, which returns
// once the slot is the attempt's), renews its lease while it runs, and
// releases it at its end; a slot whose lease runs out (its worker died)
// comes back.
const (
	LimitWorkflowType  = "CapflowLimit"
	LimitAcquireUpdate = "acquire"
	// LimitReleaseSignal carries a holder: its slot comes back, or, still
	// waiting, it leaves the queue (a cancelled step takes nothing).
	LimitReleaseSignal = "release"
	// LimitRenewSignal carries a LimitRequest: its holder's lease starts
	// again.
	LimitRenewSignal = "renew"
)

// LimitRequest is one attempt's request for a slot, with the limit as its
// tool declares it now.
type LimitRequest struct {
	Holder      string        `json:"holder"`
	Concurrency int           `json:"concurrency,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"` // between two starts (the rate)
	Lease       time.Duration `json:"lease"`
}

// LimitState is what a LimitWorkflow carries when it continues as new.
type LimitState struct {
	// Label names the limit for people (tool, key input): never the key's
	// value, which may be an account.
	Label   string               `json:"label"`
	Holders map[string]time.Time `json:"holders,omitempty"` // holder -> lease end
	Next    time.Time            `json:"next,omitempty"`    // the earliest next start
}

// LimitWorkflowID is the workflow that keeps a limit ("tool NAME",
// "capability CAP") for one key value (the value as a digest: it may name
// an account).
func LimitWorkflowID(scope, key string) string {
	id := "capflow-limit:" + strings.ReplaceAll(scope, " ", ":")
	if key == "" {
		return id
	}
	sum := sha256.Sum256([]byte(key))
	return id + ":" + hex.EncodeToString(sum[:8])
}
