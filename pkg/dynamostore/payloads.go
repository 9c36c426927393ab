package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Payloads keeps the parts of run records too large for a DynamoDB item
// (400 KB at most): webhook bodies up to 4,303,392 bytes on Lambda (base64
// in a proxy event within Lambda's 6 MB payload), and large step outputs. *s3payloads.Store implements it.
type Payloads interface {
	// Put stores data under key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the data stored under key.
	Get(ctx context.Context, key string) ([]byte, error)
	// DeletePrefix removes every object whose key starts with prefix.
	DeletePrefix(ctx context.Context, prefix string) error
}

// DefaultPayloadThreshold is the size in bytes above which the large parts
// of a run leave its item, unless WithPayloadThreshold says otherwise: well
// below DynamoDB's 400 KB item limit, so that the rest of the record (IDs,
// headers, step names, errors, timings) always fits beside it.
const DefaultPayloadThreshold = 300 << 10

// WithPayloads stores the large parts of run records in p, with a reference
// in the run item. Without it, a run item larger than 400 KB fails to write.
func WithPayloads(p Payloads) Option {
	return func(s *Store) { s.payloads = p }
}

// WithPayloadThreshold sets the size, in bytes as DynamoDB counts them,
// above which a run's trigger body, or its step outputs, are stored with
// Payloads instead of in the item (DefaultPayloadThreshold).
func WithPayloadThreshold(n int) Option {
	return func(s *Store) { s.threshold = n }
}

// WithLogger sets where the store logs what it does not return: failures of
// best-effort cleanup. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// Run item attributes that reference stored payloads.
const (
	attrTriggerPayload = "triggerPayload" // key of the trigger body and raw body
	attrStepsPayload   = "stepsPayload"   // key of the step outputs and response body
)

// payloadPrefix is where a run's payloads live: deleting the prefix deletes
// them all, including ones a later write superseded.
func payloadPrefix(runID string) string { return "runs/" + runID + "/" }

// payloadKey names a payload by its content. Two writes of one run never
// overwrite each other's object with other data: a duplicate CreateRun
// (RUN_EXISTS) or a second FinishRun (RUN_FINISHED) that loses its condition
// cannot corrupt what the winning write references.
func payloadKey(runID, part string, data []byte) string {
	sum := sha256.Sum256(data)
	return payloadPrefix(runID) + part + "-" + hex.EncodeToString(sum[:16])
}

// truncated is what an item holds in place of a value stored as a payload,
// and what ListRuns returns there: list pages never load payloads (a page of
// 100 runs could be hundreds of megabytes). Run and ClaimRun return the
// whole value.
func truncated(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"truncated":true,"bytes":%d}`, n))
}

// triggerPayload and stepsPayload are the stored objects. Byte slices
// (base64 in JSON) keep bodies and outputs exactly as they were, where
// json.RawMessage fields would be compacted.
type triggerPayload struct {
	Body       []byte                   `json:"body"`
	RawBody    string                   `json:"rawBody,omitempty"`
	BodyBase64 string                   `json:"bodyBase64,omitempty"`
	Files      []automation.TriggerFile `json:"files,omitempty"`
}

// stepsPayload is the steps part of a run that left its item. Steps and
// OnErrorSteps hold the whole lists, nested SWITCH and FOR_EACH results and
// FOR_EACH items journals included, as avJSON (the item's own encoding).
// Outputs is what objects written before Steps existed hold instead: the
// top-level step outputs alone.
type stepsPayload struct {
	Outputs      [][]byte        `json:"outputs,omitempty"` // by step index; nil where a step had none
	Steps        json.RawMessage `json:"steps,omitempty"`
	OnErrorSteps json.RawMessage `json:"onErrorSteps,omitempty"`
	Response     []byte          `json:"response,omitempty"` // Run.Response.Body
}

// triggerOffloaded reports whether a run's trigger data goes to Payloads:
// it depends on the trigger alone, so that later writes of the run know
// what the item holds without reading it.
func (s *Store) triggerOffloaded(t automation.TriggerData) (bool, int, error) {
	if s.payloads == nil {
		return false, 0, nil
	}
	n, err := encodedSize(t)
	if err != nil {
		return false, 0, err
	}
	return n > s.threshold, n, nil
}

// storeTrigger stores r's trigger body and raw body as a payload if they are
// too large for the item, and returns r as the item keeps it with the
// payload's key ("" when nothing was stored).
func (s *Store) storeTrigger(ctx context.Context, r automation.Run) (automation.Run, string, error) {
	off, _, err := s.triggerOffloaded(r.Trigger)
	if err != nil || !off {
		return r, "", err
	}
	data, err := json.Marshal(triggerPayload{Body: r.Trigger.Body, RawBody: r.Trigger.RawBody,
		BodyBase64: r.Trigger.BodyBase64, Files: r.Trigger.Files})
	if err != nil {
		return r, "", fmt.Errorf("encode trigger payload: %w", err)
	}
	key := payloadKey(r.ID, "trigger", data)
	if err := s.payloads.Put(ctx, key, data); err != nil {
		return r, "", fmt.Errorf("store trigger payload: %w", err)
	}
	r.Trigger.Body = truncated(len(r.Trigger.Body))
	r.Trigger.RawBody, r.Trigger.BodyBase64, r.Trigger.Files = "", "", nil
	return r, key, nil
}

// storeSteps stores r's steps, onError steps and response body as a
// payload if, beside the trigger as its item holds it, they would make the
// item larger than the threshold. The item then keeps the top-level steps
// as run lists show them (name, type, status, error, timings, attempts,
// logs unless they alone pass the threshold) with a marker in place of
// each output: what a FOR_EACH or SWITCH
// nests, and a FOR_EACH's items journal, grow with the data a run handles
// and go to the payload whole, so that the item stays small whatever the
// flow does.
func (s *Store) storeSteps(ctx context.Context, r automation.Run) (automation.Run, string, error) {
	if s.payloads == nil {
		return r, "", nil
	}
	off, trig, err := s.triggerOffloaded(r.Trigger)
	if err != nil {
		return r, "", err
	}
	if off {
		stub := r.Trigger
		stub.Body, stub.RawBody, stub.BodyBase64, stub.Files = truncated(0), "", "", nil
		if trig, err = encodedSize(stub); err != nil {
			return r, "", err
		}
	}
	size := trig
	for _, v := range []any{r.Steps, r.OnErrorSteps, r.Response} {
		n, err := encodedSize(v)
		if err != nil {
			return r, "", err
		}
		size += n
	}
	if size <= s.threshold {
		return r, "", nil
	}
	var p stepsPayload
	if p.Steps, err = marshalAV(r.Steps); err != nil {
		return r, "", fmt.Errorf("encode steps payload: %w", err)
	}
	if len(r.OnErrorSteps) > 0 {
		if p.OnErrorSteps, err = marshalAV(r.OnErrorSteps); err != nil {
			return r, "", fmt.Errorf("encode steps payload: %w", err)
		}
	}
	if r.Response != nil {
		p.Response = r.Response.Body
	}
	data, err := json.Marshal(p)
	if err != nil {
		return r, "", fmt.Errorf("encode steps payload: %w", err)
	}
	key := payloadKey(r.ID, "steps", data)
	if err := s.payloads.Put(ctx, key, data); err != nil {
		return r, "", fmt.Errorf("store steps payload: %w", err)
	}
	// A new list: r.Steps belongs to the caller.
	skeleton := make([]automation.StepResult, len(r.Steps))
	for i, st := range r.Steps {
		if len(st.Output) > 0 {
			st.Output = truncated(len(st.Output))
		}
		st.Steps, st.Iterations, st.ItemsJournal = nil, nil, nil
		skeleton[i] = st
	}
	if n, err := encodedSize(skeleton); err != nil {
		return r, "", err
	} else if trig+n > s.threshold {
		// CODE steps' logs (100 lines of 2 KiB each at most) in a long
		// flow: the payload has them; lists of this run show none.
		for i := range skeleton {
			skeleton[i].Logs = nil
		}
		if n, err = encodedSize(skeleton); err != nil {
			return r, "", err
		} else if trig+n > s.threshold {
			// Long error messages too: the item keeps their start.
			for i := range skeleton {
				skeleton[i].Error = cutError(skeleton[i].Error)
			}
		}
	}
	r.Steps, r.OnErrorSteps = skeleton, nil
	if r.Response != nil {
		resp := *r.Response
		if len(resp.Body) > 0 {
			resp.Body = truncated(len(resp.Body))
		}
		r.Response = &resp
	}
	return r, key, nil
}

// maxItemError is how much of a step's error a run item keeps when the
// whole error would make it too large (the payload keeps all of it).
const maxItemError = 1 << 10

// cutError is msg cut to maxItemError bytes, on a character boundary.
func cutError(msg string) string {
	if len(msg) <= maxItemError {
		return msg
	}
	cut := maxItemError
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "… (cut; the run has all of it)"
}

// loadPayloads puts the payloads an item references back into r.
func (s *Store) loadPayloads(ctx context.Context, item map[string]types.AttributeValue, r *automation.Run) error {
	if err := s.loadDraft(ctx, item, r); err != nil { // versions.go
		return err
	}
	rd := reader{item: item}
	tkey, skey := rd.str(attrTriggerPayload), rd.str(attrStepsPayload)
	if rd.err != nil {
		return rd.err
	}
	if tkey == "" && skey == "" {
		return nil
	}
	if s.payloads == nil {
		return fmt.Errorf("run %s has payloads stored outside DynamoDB, and the store has none configured (WithPayloads)", r.ID)
	}
	if tkey != "" {
		var p triggerPayload
		if err := s.getPayload(ctx, tkey, &p); err != nil {
			return err
		}
		r.Trigger.Body, r.Trigger.RawBody = p.Body, p.RawBody
		r.Trigger.BodyBase64, r.Trigger.Files = p.BodyBase64, p.Files
	}
	if skey != "" {
		var p stepsPayload
		if err := s.getPayload(ctx, skey, &p); err != nil {
			return err
		}
		if err := p.restore(r); err != nil {
			return fmt.Errorf("payload %s: %w", skey, err)
		}
		if r.Response != nil && p.Response != nil {
			r.Response.Body = p.Response
		}
	}
	return nil
}

// restore puts the steps p holds back into r, which holds them as the
// item does.
func (p stepsPayload) restore(r *automation.Run) error {
	if len(p.Steps) > 0 {
		var steps, onError []automation.StepResult
		if err := unmarshalAV(p.Steps, &steps); err != nil {
			return fmt.Errorf("decode steps: %w", err)
		}
		if len(p.OnErrorSteps) > 0 {
			if err := unmarshalAV(p.OnErrorSteps, &onError); err != nil {
				return fmt.Errorf("decode onError steps: %w", err)
			}
		}
		r.Steps, r.OnErrorSteps = steps, onError
		return nil
	}
	if len(p.Outputs) != len(r.Steps) {
		return fmt.Errorf("holds %d step outputs, the run has %d steps", len(p.Outputs), len(r.Steps))
	}
	for i, out := range p.Outputs {
		if out != nil {
			r.Steps[i].Output = out
		}
	}
	return nil
}

func (s *Store) getPayload(ctx context.Context, key string, dst any) error {
	data, err := s.payloads.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("load payload: %w", err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("decode payload %s: %w", key, err)
	}
	return nil
}

// deletePayloads removes the payloads of deleted runs, best effort: the
// runs are gone already, and the bucket's lifecycle rule removes what a
// failure here leaves. items are run items projected to their ID and
// payload references.
func (s *Store) deletePayloads(ctx context.Context, items []map[string]types.AttributeValue) {
	if s.payloads == nil {
		return
	}
	// A few at a time: each is a list and a delete call.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, it := range items {
		rd := reader{item: it}
		id := rd.str(attrID)
		if id == "" || (rd.str(attrTriggerPayload) == "" && rd.str(attrStepsPayload) == "") {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.payloads.DeletePrefix(ctx, payloadPrefix(id)); err != nil {
				s.log.WarnContext(ctx, "dynamostore: payloads of a deleted run left to the bucket's lifecycle rule",
					"run", id, "err", err)
			}
		})
	}
	wg.Wait()
}

// encodedSize is the size DynamoDB counts for v encoded as an attribute.
func encodedSize(v any) (int, error) {
	av, err := defEncoder.Encode(v)
	if err != nil {
		return 0, fmt.Errorf("encode run: %w", err)
	}
	return attrSize(av), nil
}
