package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestArgumentErrorsNameWhatIsMissing: a command run with too few or too
// many arguments says which one is missing or extra, and never reaches a
// server or a data directory.
func TestArgumentErrorsNameWhatIsMissing(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"flows", "get"}, "missing FLOW_ID (usage: flowctl flows get FLOW_ID [flags])"},
		{[]string{"flows", "enable"}, "missing FLOW_ID"},
		{[]string{"flows", "update"}, "missing FLOW_ID"},
		{[]string{"runs", "get"}, "missing FLOW_ID and RUN_ID"},
		{[]string{"runs", "retry", "flw_1"}, "missing RUN_ID"},
		{[]string{"runs", "list"}, "missing FLOW_ID"},
		{[]string{"connections", "delete"}, "missing CONNECTION_ID"},
		{[]string{"projects", "create"}, "missing NAME"},
		{[]string{"keys", "revoke"}, "missing KEY_ID"},
		{[]string{"flows", "get", "flw_1", "flw_2"}, `unexpected argument "flw_2" after FLOW_ID`},
		{[]string{"flows", "list", "ACTIVE"}, `unexpected argument "ACTIVE": flowctl flows list takes flags only`},
		{[]string{"connections", "create", "x"}, `unexpected argument "x"`},
		{[]string{"keys", "create"}, `required flag(s) "project" not set`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			root := newRoot(strings.NewReader(""), &out, &errb)
			// A URL nothing answers on: an argument error must come first.
			root.SetArgs(append([]string{"--url", "http://127.0.0.1:1", "--api-key", "k", "--data-dir", t.TempDir()}, tt.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("flowctl %v: err = %v, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestRateBeforeTheFirstRun(t *testing.T) {
	for _, tt := range []struct {
		runs int64
		rate float64
		want string
	}{{0, 0, "-"}, {2, 0, "0.0%"}, {3, 66.7, "66.7%"}} {
		if got := rate(tt.runs, tt.rate); got != tt.want {
			t.Errorf("rate(%d, %v) = %q, want %q", tt.runs, tt.rate, got, tt.want)
		}
	}
}
