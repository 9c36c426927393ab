package flowdef

import (
	"slices"
	"strings"
)

// Presets are the signature schemes a webhook or VERIFY_SIGNATURE step may
// name instead of a header and prefix.
var Presets = []string{PresetGitHub, PresetStripe, PresetSlack, PresetStandard}

func init() {
	register(Rules{
		Type:   StepVerifySignature,
		Fields: []string{"signature"},
		Check: func(_ Checks, st *Step, at string) error {
			if st.Signature == nil {
				return Invalid(`%s.signature is required for VERIFY_SIGNATURE, e.g. {"header": "x-hub-signature-256", "prefix": "sha256=", "secret": "…"}`, at)
			}
			return CheckSignature(at+".signature", st.Signature)
		},
	})
}

// CheckSignature checks a signature setting (a webhook's or a
// VERIFY_SIGNATURE step's) at path at.
func CheckSignature(at string, sg *Signature) error {
	if sg.Secret == "" {
		return Invalid("%s.secret is required", at)
	}
	if sg.Preset != "" {
		if !slices.Contains(Presets, sg.Preset) {
			return Invalid("%s.preset %q: allowed values are %s", at, sg.Preset, strings.Join(Presets, ", "))
		}
		if sg.Header != "" || sg.Prefix != "" {
			return Invalid("%s: a preset fixes the header and prefix; send either preset or header (with an optional prefix)", at)
		}
		if sg.Preset == PresetStandard && !sg.Secret.Masked() && !strings.Contains(string(sg.Secret), "{{") {
			if _, err := StandardKey(string(sg.Secret)); err != nil {
				return Invalid("%s.secret: %v", at, err)
			}
		}
		return nil
	}
	if !IsToken(sg.Header) {
		return Invalid("%s.header %q must be an HTTP header name, such as x-hub-signature-256 (or set preset to one of %s)", at, sg.Header, strings.Join(Presets, ", "))
	}
	return nil
}
