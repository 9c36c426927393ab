package lambdacode_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/jscode"
	"flowservice/pkg/lambdacode"
	"flowservice/pkg/sandbox"
)

// TestCodeCheckThroughCodeFunction: a check request compiles without
// running (a script that loops forever is checked at once), a syntax error
// comes back as the check's error, and a code function that cannot be
// reached refuses nothing.
func TestCodeCheckThroughCodeFunction(t *testing.T) {
	pool, err := sandbox.New(sandbox.Config{Idle: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	handler := lambdacode.Handler(pool, jscode.Check)
	checks := 0
	cfg := fakeLambda(t, func(w http.ResponseWriter, _ string, payload []byte) {
		var req automation.CodeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Check {
			checks++
		}
		res, err := handler(context.Background(), req)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			json.NewEncoder(w).Encode(map[string]string{"errorMessage": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(res)
	})
	r := lambdacode.New(cfg, "flow-prod-code")
	if err := lambdacode.CodeCheck(r, "return {"); err == nil || !strings.HasPrefix(err.Error(), "SyntaxError") {
		t.Errorf("CodeCheck(return {) = %v, want a SyntaxError", err)
	}
	if err := lambdacode.CodeCheck(r, "while (true) {}"); err != nil {
		t.Errorf("CodeCheck of a loop (compiles, never run) = %v", err)
	}
	if checks != 2 {
		t.Errorf("%d check requests reached the function, want 2", checks)
	}
	gone := fakeLambda(t, func(w http.ResponseWriter, _ string, _ []byte) {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
	})
	if err := lambdacode.CodeCheck(lambdacode.New(gone, "missing"), "return {"); err != nil {
		t.Errorf("CodeCheck with no code function = %v, want nil (checked when the step runs)", err)
	}
}
