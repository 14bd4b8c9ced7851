// Package wire holds capflow's wire types, defined once: a run's input and
// result, its steps, envelopes, gaps, decisions, graph and what Temporal
// says of its activities, with the names of its queries and updates. It
// imports nothing of Temporal, so the domain packages (plan, gap, policy,
// the step executor) speak it without linking the SDK; package client
// re-exports every name for Go services that start and steer runs.
package wire
