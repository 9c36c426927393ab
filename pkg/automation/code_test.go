package automation

import (
	"strings"
	"testing"
	"time"
)

func TestValidateCode(t *testing.T) {
	tests := []struct {
		name    string
		step    Step
		wantErr string
	}{
		{"minimal", Step{Code: "return 1"}, ""},
		{"timeout", Step{Code: "return 1", Timeout: "10s"}, ""},
		{"milliseconds", Step{Code: "return 1", Timeout: "250ms"}, ""},
		{"no code", Step{Code: "  "}, "steps[0] (js).code is required for CODE"},
		{"code too long", Step{Code: strings.Repeat("x", MaxCodeBytes+1)}, "at most 65536 are allowed"},
		{"timeout over the cap", Step{Code: "return 1", Timeout: "11s"}, `steps[0] (js).timeout "11s": use a duration above 0 and at most 10s`},
		{"timeout zero", Step{Code: "return 1", Timeout: "0s"}, "above 0"},
		{"timeout not a duration", Step{Code: "return 1", Timeout: "1000"}, `timeout "1000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.step.Name, tt.step.Type = "js", StepCode
			err := (&flowValidator{}).validateCode(&tt.step, "steps[0] (js)")
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("validateCode = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := onlyFields(&Step{Name: "h", Type: StepHTTP, URL: "https://x", Timeout: "1s"}, "steps[0]"); err == nil || !strings.Contains(err.Error(), "timeout does not apply to HTTP") {
		t.Errorf("timeout on an HTTP step: %v", err)
	}
}

func TestCodeTimeoutDefaults(t *testing.T) {
	if d, err := (Step{}).CodeTimeout(); d != DefaultCodeTimeout || err != nil {
		t.Errorf("default timeout %v %v", d, err)
	}
	for ms, want := range map[int64]time.Duration{0: time.Second, 250: 250 * time.Millisecond, 60_000: MaxCodeTimeout} {
		if got := (CodeRequest{TimeoutMs: ms}).Timeout(); got != want {
			t.Errorf("CodeRequest{TimeoutMs: %d}.Timeout() = %v, want %v", ms, got, want)
		}
	}
}
