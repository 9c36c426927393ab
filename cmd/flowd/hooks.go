//go:build !flowdtest

package main

import "flowservice/pkg/cronscheduler"

// testHooks changes nothing in a flowd built without the flowdtest tag
// (hooks_flowdtest.go).
func testHooks(*cronscheduler.Scheduler) {}
