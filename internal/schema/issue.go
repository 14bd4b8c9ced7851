package schema

// Issue is one reason a producer's values may not satisfy a consumer.
type Issue struct {
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	// Own: the plan's own value is at fault (a literal, a key the tool
	// does not take, an input missing), not what another step returns.
	Own bool `json:"-"`
	// Key: an input the tool does not take; Known: those it takes.
	Key   string   `json:"-"`
	Known []string `json:"-"`
	// Ref: the message is about the plan's reference, whole (a field the
	// producer does not return), not about the tool taking the step.
	Ref bool `json:"-"`
	// Unpromised: only that the producer's schema does not promise what
	// the consumer needs (present, typed, within bounds), not a conflict.
	Unpromised bool `json:"-"`
	// Producer: the step whose output's schema does not promise it (set
	// by the data-flow check): that tool's schema, or what the step takes
	// from it, is what to fix.
	Producer string `json:"-"`
}

func (i Issue) String() string {
	if i.Path == "" {
		return i.Message
	}
	return i.Path + ": " + i.Message
}
