package automation

import (
	"context"
	"strings"
	"unicode/utf8"
)

// validateMeta checks the fields of a flow that need no definition.
func validateMeta(f *Flow) error {
	if err := checkText("name", f.Name, 200); err != nil {
		return err
	}
	if utf8.RuneCountInString(f.Description) > 2000 {
		return Invalid("description is longer than 2000 characters")
	}
	return nil
}

// validateFlow checks and normalizes a whole flow, filling defaults.
func (s *Service) validateFlow(ctx context.Context, f *Flow) error {
	if err := validateMeta(f); err != nil {
		return err
	}
	// TODO(me): full definition validation lands next.
	if f.Trigger.Type == "" {
		f.Trigger = Trigger{Type: TriggerWebhook, Webhook: &Webhook{HTTPMethod: "POST"}}
	}
	f.TriggerType = f.Trigger.Type
	return nil
}

func checkText(field, v string, max int) error {
	if strings.TrimSpace(v) == "" {
		return Invalid("%s is required and must not be blank", field)
	}
	if utf8.RuneCountInString(v) > max {
		return Invalid("%s is longer than %d characters", field, max)
	}
	return nil
}

// isToken reports whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}
