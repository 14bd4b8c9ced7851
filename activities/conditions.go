package activities

import (
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// conditionSteps is what a condition sees of earlier steps: id ->
// {"data", "success", "status"}.
func conditionSteps(deps map[string]wfapi.StepOutcome, loaded map[string]plan.StepOutcome) map[string]any {
	out := make(map[string]any, len(deps))
	for id, o := range deps {
		out[id] = map[string]any{"data": loaded[id].Data, "success": o.Success, "status": string(o.Status)}
	}
	return out
}
