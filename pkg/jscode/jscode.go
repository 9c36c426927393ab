// Package jscode is how a CODE step's source becomes JavaScript: the body
// of a function whose parameters are what the step sees. The sandbox runs
// it, and validation checks at save time that it compiles, with the same
// wrapper, so both agree on what a syntax error is.
package jscode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dop251/goja"
)

// ScopeNames are the parameters of the function a script is the body of.
var ScopeNames = []string{"trigger", "steps", "flow", "run", "state", "item", "index", "vars"}

// Wrap makes code the body of a function of ScopeNames. The wrapper keeps
// the body on line 1, so error lines match the user's lines.
func Wrap(code string) string {
	return "(function (" + strings.Join(ScopeNames, ", ") + ") {" + code + "\n})"
}

// Compile compiles the wrapped code. A syntax error is returned as
// "SyntaxError: <message> (line L, column C)", for the step's error or a
// 400 at save time.
func Compile(code string) (*goja.Program, error) {
	p, err := goja.Compile("code", Wrap(code), false)
	if err != nil {
		var se *goja.CompilerSyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("SyntaxError: %s", strings.TrimPrefix(se.Error(), "SyntaxError: "))
		}
		return nil, fmt.Errorf("the code does not compile: %v", err)
	}
	return p, nil
}

// Check reports whether code compiles as a CODE step's body.
func Check(code string) error {
	_, err := Compile(code)
	return err
}
