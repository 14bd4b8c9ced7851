package wfapi

import "github.com/capflow/capflow/wire"

// RouteInput is the Route activity's input.
type RouteInput struct {
	Request string         `json:"request"`
	Inputs  map[string]any `json:"inputs,omitempty"`
}

// RouteResult is the Route activity's result: a plan, or why none.
type RouteResult struct {
	Plan    any        `json:"plan,omitempty"`
	Route   *RouteInfo `json:"route,omitempty"`
	Message string     `json:"message,omitempty"`
	Gaps    []wire.Gap `json:"gaps,omitempty"`
	// LLMCalls: the router's model calls, counted against the run's
	// max_llm_calls with its agent steps'.
	LLMCalls int `json:"llm_calls,omitempty"`
}
