package jscode

import "flowservice/pkg/automation"

// Checker adds the CODE compile check to an expression checker: binaries
// that run scripts (flowd) validate with it, so a script with a syntax
// error is a 400 at save. The Lambda functions keep the JavaScript engine
// out of all but the code function and pass their checker bare.
type Checker struct {
	automation.Checker
}

// Code compiles a CODE step's script as the sandbox will run it.
func (Checker) Code(src string) error { return Check(src) }

var _ automation.CodeChecker = Checker{}
