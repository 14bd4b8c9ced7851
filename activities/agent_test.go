package activities

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestReserveNeverStartsACallThatCouldPassABudget(t *testing.T) {
	price := llm.Price{InputPerMTok: 3, OutputPerMTok: 15}
	for _, tt := range []struct {
		name   string
		budget plan.Budget
		spent  wfapi.Spent
		grant  int
		bytes  int
		breach string // "" when the call is made
		max    int64  // its answer's bound
	}{
		{"room", plan.Budget{LLMCalls: 3}, wfapi.Spent{LLMCalls: 2}, 0, 3000, "", llm.DefaultMaxTokens},
		{"calls spent", plan.Budget{LLMCalls: 3}, wfapi.Spent{LLMCalls: 3}, 0, 3000, "llm_calls: 3 of 3 spent", 0},
		{"a grant", plan.Budget{LLMCalls: 3, Tokens: 3000}, wfapi.Spent{LLMCalls: 3, Tokens: 2900}, 1, 300, "", 999},
		{"tokens: the answer bounded by what is left", plan.Budget{LLMCalls: 9, Tokens: 10000}, wfapi.Spent{Tokens: 7000}, 0, 3000, "", 1999},
		{"tokens: no room", plan.Budget{LLMCalls: 9, Tokens: 10000}, wfapi.Spent{Tokens: 9000}, 0, 3000, "tokens: 9000 of 10000 spent", 0},
		{"usd: the answer bounded", plan.Budget{LLMCalls: 9, USD: 0.05}, wfapi.Spent{USD: 0.02}, 0, 3000, "", 1799},
		{"usd: no room", plan.Budget{LLMCalls: 9, USD: 0.05}, wfapi.Spent{USD: 0.049}, 0, 3000, "usd: 0.0490 of 0.0500 spent", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := llm.Request{}
			got := reserve(&req, tt.bytes, tt.budget, tt.grant, tt.spent, price)
			if got != "" || tt.breach != "" {
				if !strings.HasPrefix(got, tt.breach) || tt.breach == "" {
					t.Fatalf("breach %q, want %q", got, tt.breach)
				}
				return
			}
			if req.MaxTokens != tt.max {
				t.Fatalf("max_tokens %d, want %d", req.MaxTokens, tt.max)
			}
		})
	}
}
