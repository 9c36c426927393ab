package lambdacode_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/fairshare"
	"flowservice/pkg/lambdacode"
)

// TestSharesKeepRoomForOtherProjects: a project flooding the code function
// from one instance holds at most its share of the instance's slots (4 of
// 5); another project's script is invoked at once beside them.
func TestSharesKeepRoomForOtherProjects(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	cfg := fakeLambda(t, func(w http.ResponseWriter, _ string, payload []byte) {
		var req automation.CodeRequest
		_ = json.Unmarshal(payload, &req)
		if req.Project == "prj_flood" {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inFlight.Add(-1)
		}
		w.Write([]byte(`{"output": 1}`))
	})
	r := lambdacode.New(cfg, "code").WithShares(fairshare.New(lambdacode.DefaultInstanceSlots, 0))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.RunCode(ctx, automation.CodeRequest{Code: "return 1", Project: "prj_flood"}); err != nil {
				t.Error(err)
			}
		}()
	}
	testwait.For(t, testwait.Hang, "the flood fills its share", func() bool { return inFlight.Load() == 4 })

	res, err := r.RunCode(ctx, automation.CodeRequest{Code: "return 1", Project: "prj_quiet"})
	if err != nil || string(res.Output) != "1" {
		t.Fatalf("the quiet project's script beside the flood = %s, %v", res.Output, err)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != 4 {
		t.Errorf("the flooding project had at most %d invocations in flight, want 4 of the 5 slots", m)
	}
}
