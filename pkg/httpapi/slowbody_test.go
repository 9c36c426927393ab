package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// firstBytes wraps h so that each request to path signals arrived once
// the first bytes of its body have been read: the request has passed the
// receiver's checks and is inside the body.
func firstBytes(h http.Handler, path string, arrived chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path && r.Body != nil {
			r.Body = &signalReader{ReadCloser: r.Body, arrived: arrived}
		}
		h.ServeHTTP(w, r)
	})
}

type signalReader struct {
	io.ReadCloser
	arrived chan<- struct{}
	once    sync.Once
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 {
		s.once.Do(func() { s.arrived <- struct{}{} })
	}
	return n, err
}

// slowSender opens a connection and sends a request declaring a body of
// declared bytes, then its first byte; the rest never comes. It returns
// the connection.
func slowSender(t *testing.T, base, path string, declared int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, declared)
	return conn
}

// waitArrived takes n signals from arrived, failing the test after a
// generous bound (an event, not a timing assumption).
func waitArrived(t *testing.T, arrived <-chan struct{}, n int, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-arrived:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d %s arrived in 60 s", i, n, what)
		}
	}
}

// TestSlowBodiesDoNotStarveOtherProjects is the slow-body attack: 16
// connections to one project's webhook declare 256 KiB each and send one
// byte; while they hang, another project's small webhooks are answered.
// Before, each slow body reserved its declared length until its request
// ended (up to 60 s), the small bodies' share was full, and the other
// project's webhooks were 0 of 30 answered (503 BODY_BUDGET after a
// second's wait each).
func TestSlowBodiesDoNotStarveOtherProjects(t *testing.T) {
	clock := newFakeTimers()
	bodies := NewBodyBudget(4<<20, 1<<20, WithTimers(clock))
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20, Bodies: bodies})
	keyB := newProjectKey(t, h.api, automation.PlanEnterprise)
	h.activeFlow(t, h.key, workflowFlow("slow", "POST", "", ""))
	h.activeFlow(t, keyB, workflowFlow("small", "POST", "", ""))
	arrived := make(chan struct{}, 16)
	srv := serve(t, firstBytes(NewWorkflowHook(h.svc, HookConfig{MaxBody: 1 << 20, Bodies: bodies}), "/webhook/slow", arrived))

	for range 16 {
		slowSender(t, srv.URL, "/webhook/slow", 256<<10)
	}
	waitArrived(t, arrived, 16, "slow bodies")

	const n = 30
	var answered int
	var took []time.Duration
	statuses := map[int]int{}
	for i := range n {
		start := time.Now()
		resp, err := http.Post(srv.URL+"/webhook/small", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusOK {
			answered++
		}
	}
	slices.Sort(took)
	t.Logf("the other project's webhooks during the attack: %d/%d answered %v; latency p50 %s, max %s",
		answered, n, statuses, took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
	if answered < n*9/10 {
		t.Errorf("%d/%d of the other project's webhooks answered during the attack (%v), want at least 90%%", answered, n, statuses)
	}
	// Loose, against a stuck receiver rather than a slow machine.
	if took[n/2] > 10*time.Second {
		t.Errorf("median latency %s", took[n/2])
	}
}

// projectID is the ID of key's project.
func projectID(t *testing.T, h *hookEnv, key string) string {
	t.Helper()
	var p struct{ ID string }
	call(t, h.api, "GET", "/api/v1/project", key, "").into(t, http.StatusOK, &p)
	return p.ID
}

// readAnswer reads the answer on a raw connection.
func readAnswer(t *testing.T, conn net.Conn) (int, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a bound against a hang, not a timing assumption
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSlowBodyCutAt408: after the grace, a body must arrive at the minimum
// rate on average. One that does not is cut with 408 BODY_TOO_SLOW and
// nothing is stored; one that keeps the rate, however slow, is received;
// the other project's deliveries go on meanwhile. The clock is the
// budget's, advanced by the test.
func TestSlowBodyCutAt408(t *testing.T) {
	clock := newFakeTimers()
	bodies := NewBodyBudget(4<<20, 1<<20, WithTimers(clock), WithReceiveRate(1<<10, 10*time.Second))
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20, Bodies: bodies})
	keyB := newProjectKey(t, h.api, automation.PlanEnterprise)
	h.activeFlow(t, h.key, workflowFlow("slow", "POST", "", ""))
	h.activeFlow(t, keyB, workflowFlow("small", "POST", "", ""))
	srv := serve(t, NewWorkflowHook(h.svc, HookConfig{MaxBody: 1 << 20, Bodies: bodies}))
	a := projectID(t, h, h.key)
	before := h.runs.count()

	body := `{"pad":"` + strings.Repeat("x", 40<<10) + `"}`
	slow := slowSender(t, srv.URL, "/webhook/slow", len(body))
	steady := slowSender(t, srv.URL, "/webhook/slow", len(body))
	inUse := func(want int64) {
		t.Helper()
		testwait.For(t, 60*time.Second, fmt.Sprintf("%d bytes charged", want), func() bool { return bodies.inUse(a) == want })
	}
	inUse(2)
	clock.Advance(9 * time.Second) // within the grace: nobody is cut
	if _, err := steady.Write([]byte(body[1 : 20<<10+1])); err != nil {
		t.Fatal(err)
	}
	inUse(2 + 20<<10)
	clock.Advance(2 * time.Second) // 11 s: one byte is too slow, 20 KiB buys 20 s more
	status, answer := readAnswer(t, slow)
	if status != http.StatusRequestTimeout || !strings.Contains(answer, `"BODY_TOO_SLOW"`) {
		t.Fatalf("the slow body = %d %s, want 408 BODY_TOO_SLOW", status, answer)
	}
	// Only the slow sender pays: the other project is answered.
	call(t, srv, "POST", "/webhook/small", "", `{"n":1}`).started(t)
	clock.Advance(15 * time.Second) // 26 s: the steady body is still within its deadline (30 s)
	if _, err := steady.Write([]byte(body[20<<10+1:])); err != nil {
		t.Fatal(err)
	}
	if status, answer := readAnswer(t, steady); status != http.StatusOK || !strings.Contains(answer, "runId") {
		t.Fatalf("the steady body = %d %s, want 200 with its run", status, answer)
	}
	if n := h.runs.count() - before; n != 2 {
		t.Errorf("%d runs, want 2 (the steady body's and the other project's; none for the cut one)", n)
	}
	if n := bodies.inUse(""); n != 0 {
		t.Errorf("%d bytes still charged after every request ended", n)
	}
}

// TestProjectShareOfBodyBudget: one project's senders that send most of
// a body each and then stall hold at most the project's share of the
// budget; the rest of their bodies are refused 503 BODY_BUDGET, and
// another project's deliveries, small and large, are answered.
func TestProjectShareOfBodyBudget(t *testing.T) {
	clock := newFakeTimers()
	bodies := NewBodyBudget(4<<20, 1<<20, WithTimers(clock))
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20, Bodies: bodies})
	keyB := newProjectKey(t, h.api, automation.PlanEnterprise)
	h.activeFlow(t, h.key, workflowFlow("greedy", "POST", "", ""))
	h.activeFlow(t, keyB, workflowFlow("other", "POST", "", ""))
	srv := serve(t, NewWorkflowHook(h.svc, HookConfig{MaxBody: 1 << 20, Bodies: bodies}))
	a, share := projectID(t, h, h.key), bodies.ProjectShare()

	// 60 bodies of 200 KiB, 150 KiB of each sent: 9 MiB, more than the
	// whole budget (8 MiB).
	// A delivery left waiting for room ends when its wait does, once the
	// connections are closed (cleanups run last first).
	t.Cleanup(func() { clock.Advance(maxBodyWait) })
	part := `{"pad":"` + strings.Repeat("x", 150<<10)
	var refused atomic.Int32
	for range 60 {
		c := slowSender(t, srv.URL, "/webhook/greedy", 200<<10)
		if _, err := c.Write([]byte(part[1:])); err != nil {
			t.Fatal(err)
		}
		go func() {
			// Ends with an answer, or when the test closes c.
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	testwait.For(t, 60*time.Second, "the greedy project to reach its share", func() bool {
		return bodies.inUse(a) > share-(150<<10)
	})
	var statuses = map[int]int{}
	for i, size := range []int{10, 100 << 10, 10, 600 << 10, 10} {
		r := call(t, srv, "POST", "/webhook/other", "", fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("y", size)))
		statuses[r.status]++
	}
	if held := bodies.inUse(a); held > share {
		t.Errorf("the greedy project holds %d bytes, over its share %d", held, share)
	}
	if statuses[http.StatusOK] != 5 {
		t.Errorf("the other project's deliveries beside the greedy one: %v, want 5 answered 200", statuses)
	}
	// The greedy connections past the share were refused, not left hanging.
	testwait.For(t, 60*time.Second, "a greedy connection refused 503", func() bool { return refused.Load() > 0 })
	t.Logf("greedy project: %d bytes held (share %d), %d of 60 refused 503 so far", bodies.inUse(a), share, refused.Load())
}
