package pgstore_test

import (
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

func TestWaitpointContract(t *testing.T) {
	storetest.RunWaitpoints(t, func(t *testing.T) automation.WaitpointStore { return open(t) })
}
