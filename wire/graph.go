package wire

// GraphQuery answers a run's plan as resolved: its steps and their edges
// (what the console draws; any client may ask).
const GraphQuery = "graph"

// StatesQuery answers every step's state now, in the graph's step order:
// what the console paints a large plan from (the progress answer of a run
// of thousands of steps leaves the succeeded and pending ones out).
const StatesQuery = "states"

// GraphPageQuery and StatesPageQuery answer the same from a step on (an
// argument: its index): a plan past one answer's bound is read in pages.
const (
	GraphPageQuery  = "graph-page"
	StatesPageQuery = "states-page"
)

// Graph is a run's plan as a graph.
type Graph struct {
	Plan  string      `json:"plan"`
	Steps []GraphStep `json:"steps"`
	// Omitted counts steps left out of a plan too large to answer whole.
	Omitted int `json:"omitted,omitempty"`
}

// GraphStep is one step: what it runs and what it waits for.
type GraphStep struct {
	ID         string `json:"id"`
	Capability string `json:"capability,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Version    string `json:"version,omitempty"`
	// Deps are every step it waits for; Data those whose output it reads
	// (the others it only `needs`).
	Deps []string `json:"deps,omitempty"`
	Data []string `json:"data,omitempty"`
	// ForEach, When, Plan and Approval: its control flow.
	ForEach  bool   `json:"for_each,omitempty"`
	When     string `json:"when,omitempty"`
	Plan     string `json:"plan,omitempty"`
	Approval bool   `json:"approval,omitempty"`
}

// MaxGraphPage is how many steps one answer of the graph and states
// queries carries (a query's answer travels in one gRPC message).
const MaxGraphPage = 10000
